package header

import (
	"net/http"
	"net/textproto"
	"testing"
	"time"
)

// TestParseKeysCanonical guards the direct lookups h[key]: they find
// what h.Get finds only for canonical keys.
func TestParseKeysCanonical(t *testing.T) {
	keys := []string{
		keyRetryAfterMs, keyRetryAfter, keyXRateLimitResource, keyShouldRetry,
		keyRateLimit, keyRateLimitPolicy, keyRateLimitLimit, keyRateLimitRemaining, keyRateLimitReset,
	}
	for _, k := range []xRateLimitFields{xRateLimitKeys, xRateLimitXKeys} {
		keys = append(keys, k.limit, k.remaining, k.used, k.resetAfter, k.reset)
	}
	for _, k := range keys {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("key %q is not canonical (%q)", k, c)
		}
	}
}

// TestParseEachFieldAlone checks that every field Parse reads
// is found when it is the only one: the pass that picks the families to
// look up must not skip it.
func TestParseEachFieldAlone(t *testing.T) {
	now := time.Unix(1700000000, 0)
	quota := func(name string) func(Signal) bool {
		return func(s Signal) bool { _, ok := s.Quota(name); return ok }
	}
	tests := []struct {
		name, value string
		ok          func(Signal) bool
	}{
		{"retry-after-ms", "10", func(s Signal) bool { return s.RetryAfter == 10*time.Millisecond }},
		{"retry-after", "3", func(s Signal) bool { return s.RetryAfter == 3*time.Second }},
		{"x-ratelimit-limit", "10", quota("requests")},
		{"x-ratelimit-remaining", "10", quota("requests")},
		{"x-ratelimit-reset", "10", quota("requests")},
		{"x-ratelimit-reset-after", "10", quota("requests")},
		{"x-rate-limit-limit", "10", quota("requests")},
		{"x-rate-limit-remaining", "10", quota("requests")},
		{"x-rate-limit-reset", "10", quota("requests")},
		{"x-rate-limit-reset-after", "10", quota("requests")},
		{"x-ratelimit-resource", "core", func(s Signal) bool { return s.Scope == "core" }},
		{"ratelimit", `"burst";r=5`, quota("burst")},
		{"ratelimit-policy", `"burst";q=5`, quota("burst")},
		{"ratelimit", "limit=5", quota("default")},
		{"ratelimit-limit", "5", quota("default")},
		{"ratelimit-remaining", "5", quota("default")},
		{"ratelimit-reset", "5", quota("default")},
		{"x-should-retry", "true", func(s Signal) bool { return s.ShouldRetry == RetryHintRetry }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			h.Set(tt.name, tt.value)
			if s := Parse(http.StatusOK, h, now, 0); !tt.ok(s) {
				t.Fatalf("%s: %s alone gave %+v", tt.name, tt.value, s)
			}
		})
	}
}

// TestParseNoHeadersAllocs guards issue 10: a response without
// rate-limit fields, read without dialects, allocates nothing.
func TestParseNoHeadersAllocs(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for name, h := range map[string]http.Header{
		"nil":          nil,
		"empty":        {},
		"content-type": {"Content-Type": {"application/json"}},
		"typical": {"Content-Type": {"application/json"}, "Date": {"Mon, 05 Aug 2019 09:27:05 GMT"},
			"Server": {"nginx"}, "X-Request-Id": {"req_1"}, "Rate": {"x"}, "Xylophone": {"x"}},
	} {
		for _, status := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			if n := testing.AllocsPerRun(100, func() { _ = Parse(status, h, now, 0) }); n != 0 {
				t.Errorf("%s, %d: %v allocations, want 0", name, status, n)
			}
		}
	}
}
