package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/header"
)

// OpenAIPreset returns OpenAI's request and token limits for the numbers the
// caller gives (platform.openai.com/docs/guides/rate-limits: RPM and TPM are
// set per organisation, project, model and usage tier, and shown on the
// account's Limits page, not in the guide):
//
//   - openai-requests: c.RPM requests/min, burst one second's worth
//     (RPM/60, at least 1).
//   - openai-tokens (when c.TPM > 0): c.TPM tokens/min, each request
//     weighing its estimate (see [LLMConfig.Tokens]), burst c.TPM: OpenAI
//     replenishes continuously (its reset header is the time until the
//     quota is whole again), and any request that fits a minute's quota
//     must be admissible.
//
// OpenAI's daily limits (RPD, TPD) are not rules. The dialect is [OpenAI].
func OpenAIPreset(c LLMConfig) Preset {
	return llmPreset(openAIName, "api.openai.com", "tokens", c, OpenAI)
}

// OpenAI reads OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// fields (and the *-tokens_usage_based variants) into quotas named
// "requests", "tokens" and "tokens_usage_based". The reset is a Go-like
// duration ("1s", "6m0s", "12ms", "1h2m3.5s", see [ParseOpenAIDuration])
// meaning the time until the quota is fully replenished, not the time until
// the next request is allowed. Retry-After, retry-after-ms and
// x-should-retry are read by header.Parse itself. It names itself "openai"
// in header.Signal.Dialect when it read a quota: the standard
// X-RateLimit-* fields that other providers send are not OpenAI's.
//
// Source: platform.openai.com/docs/guides/rate-limits ("Rate limits in
// headers"); the OpenAI Python SDK for retry-after-ms and x-should-retry.
var OpenAI header.Dialect = header.DialectFunc(parseOpenAI)

// openAIPrefix begins the key of every field the OpenAI dialect reads.
const openAIPrefix = "X-Ratelimit-"

// openAIQuotas are the quotas OpenAI reports, in the order they are read.
var openAIQuotas = [...]quotaFields{
	openAIQuota("requests", "requests"),
	openAIQuota("tokens", "tokens"),
	openAIQuota("tokens_usage_based", "tokens"),
}

// openAIQuota returns the fields of the quota name:
// x-ratelimit-{limit,remaining,reset}-<name>.
func openAIQuota(name, unit string) quotaFields {
	return quotaFields{
		name: name, unit: unit,
		limit:     http.CanonicalHeaderKey(openAIPrefix + "Limit-" + name),
		remaining: http.CanonicalHeaderKey(openAIPrefix + "Remaining-" + name),
		reset:     http.CanonicalHeaderKey(openAIPrefix + "Reset-" + name),
	}
}

func parseOpenAI(_ int, h http.Header, _ time.Time, s *header.Signal) {
	if !hasKeyPrefix(h, openAIPrefix) {
		return
	}
	for i := range openAIQuotas {
		f := &openAIQuotas[i]
		q := header.Quota{Name: f.name, Unit: f.unit}
		q.Limit, q.HasLimit = header.ParseCount(value(h, f.limit))
		q.Remaining, q.HasRemaining = header.ParseCount(value(h, f.remaining))
		q.Reset, q.HasReset = ParseOpenAIDuration(value(h, f.reset))
		if q.HasLimit || q.HasRemaining || q.HasReset {
			s.SetQuota(q)
			s.Dialect = openAIName
		}
	}
}

// ParseOpenAIDuration parses the duration strings OpenAI sends in
// x-ratelimit-reset-*: a sequence of decimal numbers each followed by a
// unit ("1s", "6m0s", "12ms", "1h2m3.5s", "0.5s"). It is more tolerant than
// time.ParseDuration: it also accepts "d" (days), "us"/"µs", surrounding
// whitespace and a bare number meaning seconds ("20"); it saturates at the
// largest Duration instead of failing on overflow. Signs, unknown units and
// empty or over-long (>256 bytes) values are rejected.
func ParseOpenAIDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxValueLen {
		return 0, false
	}
	if d, ok := header.ParseDelaySeconds(v); ok {
		return d, true
	}
	var total float64 // seconds; float keeps saturation simple
	for v != "" {
		i := 0
		dot := false
		for i < len(v) && isNumberByte(v[i]) {
			if v[i] == '.' {
				if dot {
					return 0, false
				}
				dot = true
			}
			i++
		}
		num := v[:i]
		j := i
		for j < len(v) && !isNumberByte(v[j]) {
			j++
		}
		unit := v[i:j]
		v = v[j:]
		scale, ok := openAIUnits[unit]
		if !ok {
			return 0, false
		}
		n, ok := header.ParseDelaySeconds(num) // rejects "", "." and ".5"
		if !ok {
			return 0, false
		}
		total += n.Seconds() * scale
	}
	return header.SecondsToDuration(total), true
}

func isNumberByte(c byte) bool { return c >= '0' && c <= '9' || c == '.' }

// openAIUnits maps a unit to its length in seconds.
var openAIUnits = map[string]float64{
	"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3,
	"s": 1, "m": 60, "h": 3600, "d": 86400,
}
