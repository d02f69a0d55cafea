package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
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
	return llmPreset("anthropic", "api.anthropic.com", "input-tokens", c, Anthropic)
}

// Anthropic reads anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset} into quotas with those names
// ("requests" counts requests, the others tokens). The reset is an RFC 3339
// timestamp ("2025-08-21T12:40:59Z"), converted to the time until it from
// now; a past reset gives 0. retry-after on 429 and x-should-retry are
// read by ParseSignal itself.
//
// Source: docs.anthropic.com/en/api/rate-limits ("Response headers").
var Anthropic throttle.Dialect = throttle.DialectFunc(parseAnthropic)

func parseAnthropic(_ int, h http.Header, now time.Time, s *throttle.Signal) {
	for _, name := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
		q := throttle.Quota{Name: name, Unit: "tokens"}
		if name == "requests" {
			q.Unit = "requests"
		}
		prefix := "Anthropic-Ratelimit-" + name + "-"
		q.Limit, q.HasLimit = throttle.ParseCount(value(h, prefix+"limit"))
		q.Remaining, q.HasRemaining = throttle.ParseCount(value(h, prefix+"remaining"))
		q.Reset, q.HasReset = ParseRFC3339Reset(value(h, prefix+"reset"), now)
		if q.HasLimit || q.HasRemaining || q.HasReset {
			s.SetQuota(q)
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
