package providers

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// LLMConfig tunes [OpenAIPreset] and [AnthropicPreset]. Their limits depend
// on the account's usage tier and the model, so the caller gives them: the
// zero RPM is invalid, and [throttle.New] reports it naming the rule.
type LLMConfig struct {
	// RPM is the account's requests per minute for the model called.
	RPM int

	// TPM, if > 0, adds a rule of TPM tokens per minute: OpenAI's TPM, or
	// Anthropic's input tokens per minute (ITPM).
	TPM int

	// Tokens estimates the tokens a request counts against TPM. If nil, a
	// quarter of the body's length: a floor that counts the prompt only
	// (with its JSON) and none of the completion. Give your own estimate
	// (prompt tokens plus max_tokens) for anything better.
	Tokens func(*http.Request) int

	// Host is the host the rules match. If empty, the provider's API host.
	Host string

	// Key partitions every rule. If nil, all requests share the buckets:
	// limits are per organisation (and project), not per API key, so
	// partitioning by key would be wrong for two keys of one organisation.
	Key func(*http.Request) string
}

func llmPreset(name, host, tokens string, c LLMConfig, d header.Dialect) Preset {
	if c.Host != "" {
		host = c.Host
	}
	m := throttle.Match{Host: host}
	rules := []throttle.Rule{{
		Name:  ruleName(name, "requests"),
		Limit: throttle.Limit{Rate: c.RPM, Period: time.Minute, Burst: max(1, c.RPM/60)},
		Match: m,
		Key:   c.Key,
	}}
	if c.TPM > 0 {
		cost := c.Tokens
		if cost == nil {
			cost = estimateTokens
		}
		rules = append(rules, throttle.Rule{
			Name:  ruleName(name, tokens),
			Limit: throttle.Limit{Rate: c.TPM, Period: time.Minute, Burst: c.TPM},
			Match: m,
			Key:   c.Key,
			Cost:  cost,
		})
	}
	return Preset{Name: name, Rules: rules, Dialect: d}
}

// estimateTokens is the default token estimate of the LLM presets: a
// quarter of the request body's length (OpenAI's rule of thumb of about 4
// characters of English per token), at least 1. It counts the prompt only,
// JSON syntax included, and nothing of the completion; a body of unknown
// length counts 1.
func estimateTokens(r *http.Request) int {
	if r.ContentLength <= 0 {
		return 1
	}
	return int(min(r.ContentLength/4+1, 1<<30))
}
