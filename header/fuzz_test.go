package header_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

// The fuzz targets assert the parsers' invariants on arbitrary input: no
// panic, every wait in [0, cap], every reported count non-negative. Seed
// corpora live in testdata/fuzz/<Name>/ in addition to the f.Add seeds.

var fuzzNow = time.Unix(1470173000, 0)

const fuzzMaxWait = 30 * time.Second

func checkFuzzSignal(t *testing.T, s header.Signal, maxWait time.Duration) {
	t.Helper()
	if s.RetryAfter < 0 || s.RetryAfter > maxWait {
		t.Fatalf("RetryAfter %v outside [0, %v]", s.RetryAfter, maxWait)
	}
	for _, q := range s.Quotas {
		if q.Reset < 0 || q.Reset > maxWait {
			t.Fatalf("Reset %v outside [0, %v] in %v", q.Reset, maxWait, q)
		}
		if q.Window < 0 {
			t.Fatalf("negative Window in %v", q)
		}
		if q.Remaining < 0 || q.Limit < 0 || (!q.HasRemaining && q.Remaining != 0) {
			t.Fatalf("bad count in %v", q)
		}
	}
	if w, _ := s.Wait(); w < 0 || w > maxWait {
		t.Fatalf("Wait %v outside [0, %v]", w, maxWait)
	}
	if !header.IsDialectName(s.Dialect) {
		t.Fatalf("Dialect %q is not a short name", s.Dialect)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "2.0", "65", "Fri, 31 Dec 1999 23:59:59 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Fri, 31 Dec 9999 23:59:59 GMT",
		"-1", "NaN", "99999999999999999999", "1e9", ""} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, retryAfter, millis string) {
		if d, ok := header.ParseRetryAfter(retryAfter, fuzzNow); d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", retryAfter, d, ok)
		}
		if d, ok := header.ParseRetryAfterMillis(millis); d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfterMillis(%q) = %v, %v", millis, d, ok)
		}
		h := http.Header{"Retry-After": {retryAfter}, "Retry-After-Ms": {millis}}
		s := header.Parse(http.StatusServiceUnavailable, h, fuzzNow, fuzzMaxWait)
		checkFuzzSignal(t, s, fuzzMaxWait)
		if s.Limited != s.HasRetryAfter {
			t.Fatalf("503: Limited %v but HasRetryAfter %v", s.Limited, s.HasRetryAfter)
		}
	})
}

func FuzzXRateLimit(f *testing.F) {
	f.Add("5000", "4999", "1372700873", "", "1")
	f.Add("10", "0", "1470173023.123", "64.57", "")
	f.Add("900", "847", "1705420800", "", "")
	f.Add("-1", "99999999999999999999", "NaN", "Inf", "-3")
	f.Add("60", "", "1470173023123", "0.0000000001", "75")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, resetAfter, used string) {
		h := http.Header{
			"X-Ratelimit-Limit": {limit}, "X-Ratelimit-Remaining": {remaining},
			"X-Ratelimit-Reset": {reset}, "X-Ratelimit-Reset-After": {resetAfter},
			"X-Ratelimit-Used":   {used},
			"X-Rate-Limit-Reset": {reset},
		}
		q, _ := header.ParseXRateLimit(h, fuzzNow)
		if q.Reset < 0 || q.Remaining < 0 || q.Limit < 0 {
			t.Fatalf("ParseXRateLimit = %v", q)
		}
		if d, ok := header.ParseReset(reset, fuzzNow); d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseReset(%q) = %v, %v", reset, d, ok)
		}
		checkFuzzSignal(t, header.Parse(http.StatusTooManyRequests, h, fuzzNow, fuzzMaxWait), fuzzMaxWait)
	})
}

func FuzzIETF(f *testing.F) {
	f.Add(`"default";r=50;t=30`, `"burst";q=100;w=60,"daily";q=1000;w=86400`, "", "")
	f.Add(`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, "", "")
	f.Add("limit=100, remaining=50, reset=5", "100;w=10", "", "")
	f.Add("", "10;w=1, 50;w=60", "100", "50")
	f.Add(`"a";r=-1;t=-1`, `"a";q=999999999999999;w=999999999999999`, "-1", "NaN")
	f.Fuzz(func(t *testing.T, rateLimit, policy, limit, remaining string) {
		h := http.Header{
			"Ratelimit": {rateLimit}, "Ratelimit-Policy": {policy},
			"Ratelimit-Limit": {limit}, "Ratelimit-Remaining": {remaining}, "Ratelimit-Reset": {limit},
		}
		for _, q := range header.ParseIETF(h, fuzzNow) {
			if q.Reset < 0 || q.Window < 0 || q.Remaining < 0 || q.Limit < 0 {
				t.Fatalf("ParseIETF gave %v", q)
			}
		}
		checkFuzzSignal(t, header.Parse(http.StatusOK, h, fuzzNow, fuzzMaxWait), fuzzMaxWait)
	})
}

// fuzzHeaderNames are the fields FuzzParse assigns values to: every
// standard field and every field a provider dialect reads.
var fuzzHeaderNames = []string{
	"Retry-After", "Retry-After-Ms", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
	"X-Ratelimit-Reset-After", "Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Limit-Tokens",
	"X-Ratelimit-Reset-Requests", "Anthropic-Ratelimit-Tokens-Reset", "X-Shopify-Shop-Api-Call-Limit",
	"Sforce-Limit-Info", "X-Hubspot-Ratelimit-Interval-Milliseconds", "X-Ratelimit-Scope", "Stripe-Should-Retry",
	"Twilio-Concurrent-Requests", "X-Ratelimit-Resource",
}

func FuzzParse(f *testing.F) {
	f.Add(429, "65", "0", "1470173023.123", "64.57", `"default";r=0;t=5`, int64(0))
	f.Add(403, "", "0", "1372700873", "", "", int64(30e9))
	f.Add(200, "2.0", "32/40", "6m0s", "2025-08-21T12:40:59Z", "api-usage=18/5000", int64(-1))
	f.Add(503, "Fri, 31 Dec 9999 23:59:59 GMT", "-1", "NaN", "99999999999999999999", "\x00", int64(1))
	dialects := []header.Dialect{providers.OpenAI, providers.Anthropic, providers.Shopify, providers.GitHub,
		providers.Discord, providers.Stripe, providers.Salesforce, providers.HubSpot, providers.Twilio}
	f.Fuzz(func(t *testing.T, status int, a, b, c, d, e string, maxWait int64) {
		vals := []string{a, b, c, d, e}
		h := http.Header{}
		for i, name := range fuzzHeaderNames {
			h[name] = []string{vals[i%len(vals)]}
		}
		mw := time.Duration(maxWait)
		s := header.Parse(status, h, fuzzNow, mw, dialects...)
		if mw <= 0 {
			mw = header.DefaultMaxRetryAfter
		}
		checkFuzzSignal(t, s, mw)
	})
}

// FuzzDialectName: whatever name a user's dialect sets, Parse keeps it
// when it is a short name and clears it otherwise, so an exporter never
// gets a long or odd attribute value from it.
func FuzzDialectName(f *testing.F) {
	for _, name := range []string{"", "stripe", "MyCorp-v2_internal.api", "Bearer sk_live_123", "https://api.example/v1",
		"a\x00b", "straße", "\xff", strings.Repeat("d", 64), strings.Repeat("d", 65)} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		d := header.DialectFunc(func(_ int, _ http.Header, _ time.Time, s *header.Signal) { s.Dialect = name })
		s := header.Parse(http.StatusTooManyRequests, http.Header{}, fuzzNow, fuzzMaxWait, d)
		checkFuzzSignal(t, s, fuzzMaxWait)
		if s.Dialect != name && s.Dialect != "" {
			t.Fatalf("Dialect %q, want %q or nothing", s.Dialect, name)
		}
		const nameBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
		short := len(name) <= header.MaxDialectName && strings.Trim(name, nameBytes) == ""
		if s.Dialect == "" && name != "" && short {
			t.Fatalf("short name %q cleared", name)
		}
	})
}
