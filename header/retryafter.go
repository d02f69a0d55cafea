package header

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses a Retry-After field value (RFC 9110 §10.2.3)
// relative to now, the time the response was received.
//
// It accepts delay-seconds ("120"), fractional seconds as Shopify sends
// them ("2.0"), and the three HTTP-date forms of RFC 9110 §5.6.7:
// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the obsolete RFC 850 form
// ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime ("Sun Nov  6 08:49:37
// 1994"). A date in the past gives 0. The result is never negative but is
// not capped: a huge delay saturates at the largest time.Duration, and
// [Parse] caps it. Signs, exponents, NaN, Inf, empty values and values
// longer than 256 bytes are rejected (false).
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxNumericHeaderLen {
		return 0, false
	}
	if d, ok := ParseDelaySeconds(value); ok {
		return d, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	// time.Time.Sub saturates instead of overflowing for year-9999 dates.
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

// parseRetryAfterMillis parses retry-after-ms (OpenAI SDKs, Azure OpenAI):
// a non-negative number of milliseconds, possibly with a fraction ("10",
// "1500.5"). Same rejection rules and saturation as [ParseRetryAfter].
func parseRetryAfterMillis(value string) (time.Duration, bool) {
	f, ok := parseDecimal(value)
	if !ok {
		return 0, false
	}
	return SecondsToDuration(f / 1000), true
}

// ParseDelaySeconds parses a non-negative decimal number of seconds
// ("120", "2.0", "64.57") into a Duration, saturating at the largest
// Duration. It accepts only ASCII digits with at most one '.', at least one
// digit before it: no sign, exponent, hex, NaN, Inf or surrounding
// garbage. Used for Retry-After, X-RateLimit-Reset-After and
// RateLimit-Reset.
func ParseDelaySeconds(value string) (time.Duration, bool) {
	f, ok := parseDecimal(value)
	if !ok {
		return 0, false
	}
	return SecondsToDuration(f), true
}

// ParseShouldRetry parses x-should-retry or Stripe-Should-Retry: "true"
// gives [RetryHintRetry], "false" gives [RetryHintDoNotRetry] (ASCII case
// ignored), anything else [RetryHintNone].
func ParseShouldRetry(value string) RetryHint {
	switch v := strings.TrimSpace(value); {
	case strings.EqualFold(v, "true"):
		return RetryHintRetry
	case strings.EqualFold(v, "false"):
		return RetryHintDoNotRetry
	}
	return RetryHintNone
}

// parseDecimal parses `1*DIGIT [ "." *DIGIT ]` (surrounding whitespace
// allowed) as a float64. Values up to 256 bytes cannot overflow float64.
func parseDecimal(value string) (float64, bool) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxNumericHeaderLen {
		return 0, false
	}
	dot := false
	for i := 0; i < len(value); i++ {
		c := value[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return f, true
}
