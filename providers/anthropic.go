package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/header"
)

// AnthropicPreset returns Anthropic's request and input-token limits for
// the numbers the caller gives (docs.anthropic.com/en/api/rate-limits:
// requests, input and output tokens per minute, per model family and usage
// tier):
//
//   - anthropic-requests: c.RPM requests/min, burst RPM/60 (at least 1).
//   - anthropic-input-tokens (when c.TPM > 0): c.TPM input tokens/min
//     (ITPM), each request weighing its estimate, burst c.TPM.
//
// Output tokens per minute (OTPM) depend on the completion, unknown before
// the request, so the preset has no rule for them: append one with your
// own estimate (max_tokens, say) if you need it. The dialect [Anthropic]
// reads what is left of every quota from the headers.
func AnthropicPreset(c LLMConfig) Preset {
	return llmPreset(anthropicName, "api.anthropic.com", "input-tokens", c, Anthropic)
}

// Anthropic reads anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset} into quotas with those names
// ("requests" counts requests, the others tokens). The reset is an RFC 3339
// timestamp ("2025-08-21T12:40:59Z"), converted to the time until it from
// now; a past reset gives 0. retry-after on 429 and x-should-retry are
// read by header.Parse itself. It names itself "anthropic" in
// header.Signal.Dialect when it read a quota.
//
// Source: docs.anthropic.com/en/api/rate-limits ("Response headers").
var Anthropic header.Dialect = header.DialectFunc(parseAnthropic)

// anthropicPrefix begins the key of every field the Anthropic dialect
// reads.
const anthropicPrefix = "Anthropic-Ratelimit-"

// anthropicQuotas are the quotas Anthropic reports, in the order they are
// read.
var anthropicQuotas = [...]quotaFields{
	anthropicQuota("requests", "requests"),
	anthropicQuota("tokens", "tokens"),
	anthropicQuota("input-tokens", "tokens"),
	anthropicQuota("output-tokens", "tokens"),
}

// anthropicQuota returns the fields of the quota name:
// anthropic-ratelimit-<name>-{limit,remaining,reset}.
func anthropicQuota(name, unit string) quotaFields {
	return quotaFields{
		name: name, unit: unit,
		limit:     http.CanonicalHeaderKey(anthropicPrefix + name + "-limit"),
		remaining: http.CanonicalHeaderKey(anthropicPrefix + name + "-remaining"),
		reset:     http.CanonicalHeaderKey(anthropicPrefix + name + "-reset"),
	}
}

func parseAnthropic(_ int, h http.Header, now time.Time, s *header.Signal) {
	if !hasKeyPrefix(h, anthropicPrefix) {
		return
	}
	for i := range anthropicQuotas {
		f := &anthropicQuotas[i]
		q := header.Quota{Name: f.name, Unit: f.unit}
		q.Limit, q.HasLimit = header.ParseCount(value(h, f.limit))
		q.Remaining, q.HasRemaining = header.ParseCount(value(h, f.remaining))
		q.Reset, q.HasReset = ParseRFC3339Reset(value(h, f.reset), now)
		if q.HasLimit || q.HasRemaining || q.HasReset {
			s.SetQuota(q)
			s.Dialect = anthropicName
		}
	}
}

// ParseRFC3339Reset parses an RFC 3339 timestamp (Anthropic's reset) into
// the time from now until it: never negative (a past time gives 0),
// saturating for far-future dates. Values over 256 bytes are rejected.
func ParseRFC3339Reset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxValueLen {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
