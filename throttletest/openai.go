package throttletest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle"
)

// OpenAIConfig tunes [OpenAI]. OpenAI's limits depend on the account's
// usage tier and the model, so the caller gives them: the zero RPM is
// invalid, and [NewServer] reports it naming the rule.
type OpenAIConfig struct {
	// RPM is the requests per minute.
	RPM int

	// TPM, if > 0, adds a limit of TPM tokens per minute.
	TPM int

	// Tokens counts the tokens of a request against TPM. If nil, a
	// quarter of the body's length plus one, the estimate of
	// providers.OpenAIPreset (OpenAI's own count, the prompt's tokens plus
	// max_tokens, needs its tokenizer).
	Tokens func(*http.Request) int
}

// OpenAI rule names, in the order they are checked.
const (
	OpenAIRequests = "openai-requests"
	OpenAITokens   = "openai-tokens"
)

// OpenAI returns a simulated OpenAI API
// (platform.openai.com/docs/guides/rate-limits, read 2026-11): token
// buckets that replenish continuously, as OpenAI's do, holding a
// minute's quota:
//
//   - openai-requests: RPM requests per minute;
//   - openai-tokens (when TPM > 0): TPM tokens per minute, each request
//     weighing [OpenAIConfig.Tokens].
//
// Every answer carries x-ratelimit-limit-requests, -remaining-requests and
// -reset-requests, and the same for tokens, the reset being the time until
// the bucket is whole again as a duration ("6m0s", "1.5s", "20ms"). Over a
// limit, status 429 with the body {"error":{"message":...,"type":
// "requests" (or "tokens"),"param":null,"code":"rate_limit_exceeded"}};
// during a [Handler.Pause], the same with a retry-after. An admitted
// request is answered 200 with "{}".
func OpenAI(c OpenAIConfig) Profile {
	rules := []throttle.Rule{{
		Name:      OpenAIRequests,
		Limit:     throttle.Limit{Rate: c.RPM, Period: time.Minute, Burst: c.RPM},
		Algorithm: throttle.TokenBucket,
	}}
	if c.TPM > 0 {
		cost := c.Tokens
		if cost == nil {
			cost = func(r *http.Request) int { return int(min(max(r.ContentLength, 0)/4+1, 1<<30)) }
		}
		rules = append(rules, throttle.Rule{
			Name:      OpenAITokens,
			Limit:     throttle.Limit{Rate: c.TPM, Period: time.Minute, Burst: c.TPM},
			Algorithm: throttle.TokenBucket,
			Cost:      cost,
		})
	}
	return Profile{Name: "openai", Rules: rules, Answer: openAIAnswer}
}

func openAIAnswer(_ *http.Request, d Decision) Answer {
	var a Answer
	if d.Admitted {
		a = jsonAnswer(http.StatusOK, struct{}{})
	} else {
		kind := "requests"
		if d.Rule == OpenAITokens {
			kind = "tokens"
		}
		a = jsonAnswer(http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("Rate limit reached for %s. Please try again in %s.", kind, openAIDuration(d.Wait)),
			"type":    kind,
			"param":   nil,
			"code":    "rate_limit_exceeded",
		}})
		if d.Paused {
			a.Header.Set("Retry-After", retryAfterSeconds(d.Wait))
		}
	}
	for _, f := range [...]struct{ rule, suffix string }{{OpenAIRequests, "requests"}, {OpenAITokens, "tokens"}} {
		q, ok := d.Quota(f.rule)
		if !ok {
			continue
		}
		a.Header.Set("X-Ratelimit-Limit-"+f.suffix, strconv.Itoa(q.Limit.Rate))
		a.Header.Set("X-Ratelimit-Remaining-"+f.suffix, strconv.FormatInt(q.Remaining, 10))
		a.Header.Set("X-Ratelimit-Reset-"+f.suffix, openAIDuration(q.Reset))
	}
	return a
}

// openAIDuration formats d as OpenAI's reset fields do: Go's duration
// syntax ("6m0s", "1.5s", "20ms"), rounded up to the millisecond so that a
// client waiting it finds the bucket whole.
func openAIDuration(d time.Duration) string {
	if r := d.Truncate(time.Millisecond); r < d {
		d = r + time.Millisecond
	}
	return d.String()
}
