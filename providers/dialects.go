package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// maxValueLen bounds every header value a dialect reads.
const maxValueLen = 256

// maxLimitInfoLen bounds Sforce-Limit-Info, which may list several
// counters.
const maxLimitInfoLen = 1024

// githubSecondaryWait is GitHub's documented minimum wait after a
// secondary rate limit that names no retry-after: "wait for at least one
// minute before retrying".
const githubSecondaryWait = time.Minute

func value(h http.Header, name string) string {
	return throttle.HeaderValue(h, name, maxValueLen)
}

// OpenAI reads OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// fields (and the *-tokens_usage_based variants) into quotas named
// "requests", "tokens" and "tokens_usage_based". The reset is a Go-like
// duration ("1s", "6m0s", "12ms", "1h2m3.5s", see [ParseOpenAIDuration])
// meaning the time until the quota is fully replenished, not the time until
// the next request is allowed. Retry-After, retry-after-ms and
// x-should-retry are read by ParseSignal itself.
//
// Source: platform.openai.com/docs/guides/rate-limits ("Rate limits in
// headers"); the OpenAI Python SDK for retry-after-ms and x-should-retry.
var OpenAI throttle.Dialect = throttle.DialectFunc(parseOpenAI)

func parseOpenAI(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	for _, name := range [...]string{"requests", "tokens", "tokens_usage_based"} {
		q := throttle.Quota{Name: name, Unit: "tokens"}
		if name == "requests" {
			q.Unit = "requests"
		}
		q.Limit, q.HasLimit = throttle.ParseCount(value(h, "X-Ratelimit-Limit-"+name))
		q.Remaining, q.HasRemaining = throttle.ParseCount(value(h, "X-Ratelimit-Remaining-"+name))
		q.Reset, q.HasReset = ParseOpenAIDuration(value(h, "X-Ratelimit-Reset-"+name))
		if q.HasLimit || q.HasRemaining || q.HasReset {
			s.SetQuota(q)
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
	if d, ok := throttle.ParseDelaySeconds(v); ok {
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
		n, ok := throttle.ParseDelaySeconds(num) // rejects "", "." and ".5"
		if !ok {
			return 0, false
		}
		total += n.Seconds() * scale
	}
	return throttle.SecondsToDuration(total), true
}

func isNumberByte(c byte) bool { return c >= '0' && c <= '9' || c == '.' }

// openAIUnits maps a unit to its length in seconds.
var openAIUnits = map[string]float64{
	"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3,
	"s": 1, "m": 60, "h": 3600, "d": 86400,
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

// Shopify reads X-Shopify-Shop-Api-Call-Limit ("32/40": requests used /
// bucket size, REST Admin API leaky bucket) into the quota "requests"
// (Limit 40, Remaining 8). Shopify's 429 carries "Retry-After: 2.0"
// (fractional seconds), which ParseSignal reads itself.
//
// Source: shopify.dev/docs/api/admin-rest/usage/rate-limits.
var Shopify throttle.Dialect = throttle.DialectFunc(parseShopify)

func parseShopify(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	used, size, ok := ParseUsedOfLimit(value(h, "X-Shopify-Shop-Api-Call-Limit"))
	if !ok {
		return
	}
	s.SetQuota(throttle.Quota{
		Name: "requests", Unit: "requests",
		Limit: size, HasLimit: true,
		Remaining: max(size-used, 0), HasRemaining: true,
	})
}

// ParseUsedOfLimit parses a "used/limit" ratio such as Shopify's "32/40"
// or Salesforce's "18/5000" into its two non-negative counts.
func ParseUsedOfLimit(v string) (used, limit int64, ok bool) {
	u, l, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	used, ok1 := throttle.ParseCount(u)
	limit, ok2 := throttle.ParseCount(l)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return used, limit, true
}

// GitHub reads GitHub's REST rate-limit headers. ParseSignal already reads
// x-ratelimit-limit/-remaining/-used/-reset (epoch seconds) into the quota
// "requests" and x-ratelimit-resource ("core", "search") into Scope; this
// dialect applies GitHub's documented rules for exceeded limits:
//
//   - 403 or 429 with retry-after: Limited, wait retry-after.
//   - 403 or 429 with x-ratelimit-remaining: 0: Limited, RetryAfter is the
//     time until x-ratelimit-reset.
//   - 429 otherwise (a secondary rate limit): Limited, RetryAfter 60 s
//     ("wait for at least one minute"), unless the server named a wait.
//
// A 403 with remaining > 0 and no retry-after is left unclassified: the
// secondary-limit 403 differs from a permission error only in its body,
// which a header dialect cannot see.
//
// Source: docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api.
var GitHub throttle.Dialect = throttle.DialectFunc(parseGitHub)

func parseGitHub(status int, h http.Header, _ time.Time, s *throttle.Signal) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return
	}
	if s.HasRetryAfter {
		s.Limited = true
		return
	}
	if q, ok := s.Quota("requests"); ok && q.Exhausted() {
		s.Limited = true
		if q.HasReset {
			s.RetryAfter, s.HasRetryAfter = q.Reset, true
		}
		return
	}
	if status == http.StatusTooManyRequests {
		s.Limited = true
		s.RetryAfter, s.HasRetryAfter = githubSecondaryWait, true
	}
}

// Discord reads Discord's rate-limit headers beyond the standard ones:
// X-RateLimit-Bucket into Bucket, X-RateLimit-Scope ("user", "global",
// "shared") into Scope, and X-RateLimit-Global: true into Scope "global"
// when no scope was sent. ParseSignal already reads X-RateLimit-Limit,
// -Remaining, and -Reset-After (float seconds, preferred over the epoch
// -Reset "1470173023.123") into the quota "requests".
//
// Source: discord.com/developers/docs/topics/rate-limits.
var Discord throttle.Dialect = throttle.DialectFunc(parseDiscord)

func parseDiscord(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	if b := value(h, "X-Ratelimit-Bucket"); b != "" {
		s.Bucket = b
	}
	if sc := value(h, "X-Ratelimit-Scope"); sc != "" {
		s.Scope = sc
	} else if strings.EqualFold(value(h, "X-Ratelimit-Global"), "true") {
		s.Scope = "global"
	}
}

// Stripe reads Stripe-Rate-Limited-Reason ("global-rate", "endpoint-rate",
// "global-concurrency", "endpoint-concurrency", "resource-specific") into
// Reason and Stripe-Should-Retry ("true"/"false") into ShouldRetry. Stripe
// documents no Retry-After or remaining-count headers, so a limited Stripe
// response names no wait: use your own backoff. A 429 with code
// lock_timeout (object lock contention, not a rate limit) can only be told
// apart by its body.
//
// Source: docs.stripe.com/rate-limits; stripe-go (Stripe-Should-Retry).
var Stripe throttle.Dialect = throttle.DialectFunc(parseStripe)

func parseStripe(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	if r := value(h, "Stripe-Rate-Limited-Reason"); r != "" {
		s.Reason = r
	}
	if hint := throttle.ParseShouldRetry(value(h, "Stripe-Should-Retry")); hint != throttle.RetryHintNone {
		s.ShouldRetry = hint
	}
}

// Salesforce reads Sforce-Limit-Info ("api-usage=18/5000", newer versions
// add "; api-bursts=1/750" and "per-app-api-usage=17/250(appName=x)";
// items may be separated by ';' or ',') into one quota per counter, named
// after it, with Remaining = limit - used. A 403 whose api-usage is
// exhausted is Limited (REQUEST_LIMIT_EXCEEDED); the daily allocation is a
// rolling 24 h, so no reset is reported.
//
// Source: developer.salesforce.com REST API Developer Guide, "Limit Info
// Header".
var Salesforce throttle.Dialect = throttle.DialectFunc(parseSalesforce)

func parseSalesforce(status int, h http.Header, _ time.Time, s *throttle.Signal) {
	info := throttle.HeaderValue(h, "Sforce-Limit-Info", maxLimitInfoLen)
	if info == "" {
		return
	}
	for _, item := range strings.FieldsFunc(info, func(r rune) bool { return r == ';' || r == ',' }) {
		name, ratio, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			continue
		}
		if i := strings.IndexByte(ratio, '('); i >= 0 {
			ratio = ratio[:i] // drop "(appName=x)"
		}
		used, limit, ok := ParseUsedOfLimit(ratio)
		if !ok {
			continue
		}
		q := throttle.Quota{
			Name: name, Unit: "requests",
			Limit: limit, HasLimit: true,
			Remaining: max(limit-used, 0), HasRemaining: true,
		}
		s.SetQuota(q)
		if name == "api-usage" && status == http.StatusForbidden && q.Exhausted() {
			s.Limited = true
		}
	}
}

// HubSpot reads HubSpot's rate-limit headers into up to three quotas:
// "interval" from X-HubSpot-RateLimit-Max, -Remaining and
// -Interval-Milliseconds (the rolling window, usually 10000 ms); "daily"
// from X-HubSpot-RateLimit-Daily and -Daily-Remaining (absent for OAuth
// apps; the window is 24 h, resetting at midnight in the account's time
// zone, which the headers do not give, so no reset is reported); and the
// deprecated "secondly" from -Secondly and -Secondly-Remaining.
//
// Source: developers.hubspot.com/docs/api/usage-details.
var HubSpot throttle.Dialect = throttle.DialectFunc(parseHubSpot)

func parseHubSpot(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	const p = "X-Hubspot-Ratelimit-"
	add := func(name, limitField, remainingField string, window time.Duration) {
		q := throttle.Quota{Name: name, Unit: "requests", Window: window}
		q.Limit, q.HasLimit = throttle.ParseCount(value(h, p+limitField))
		q.Remaining, q.HasRemaining = throttle.ParseCount(value(h, p+remainingField))
		if q.HasLimit || q.HasRemaining {
			s.SetQuota(q)
		}
	}
	var interval time.Duration
	if ms, ok := throttle.ParseCount(value(h, p+"Interval-Milliseconds")); ok {
		interval = throttle.SecondsToDuration(float64(ms) / 1000)
	}
	add("interval", "Max", "Remaining", interval)
	add("daily", "Daily", "Daily-Remaining", 24*time.Hour)
	add("secondly", "Secondly", "Secondly-Remaining", time.Second)
}
