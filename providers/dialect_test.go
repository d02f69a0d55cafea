package providers_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func q(name, unit string, limit, remaining int64, reset time.Duration) header.Quota {
	return header.Quota{Name: name, Unit: unit, Limit: limit, HasLimit: true, Remaining: remaining, HasRemaining: true, Reset: reset, HasReset: true}
}

// dialectCase is a response and the signal header.Parse must read from it
// with one dialect.
type dialectCase struct {
	name    string
	dialect header.Dialect
	status  int
	now     time.Time
	h       http.Header
	want    header.Signal
}

// checkDialects runs each case through header.Parse with a one-hour cap.
func checkDialects(t *testing.T, tests []dialectCase) {
	t.Helper()
	const maxWait = time.Hour
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := header.Parse(tt.status, tt.h, tt.now, maxWait, tt.dialect)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// allDialects are every dialect of the package.
var allDialects = []header.Dialect{providers.OpenAI, providers.Anthropic, providers.Shopify, providers.GitHub,
	providers.Discord, providers.Stripe, providers.Salesforce, providers.HubSpot}

func TestDialectsCapped(t *testing.T) {
	now := time.Date(2025, 8, 21, 12, 0, 0, 0, time.UTC)
	h := hdr("x-ratelimit-reset-tokens", "9999h", "anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z",
		"x-ratelimit-remaining", "0", "x-ratelimit-reset", "99999999999")
	s := header.Parse(403, h, now, 10*time.Second, providers.OpenAI, providers.Anthropic, providers.GitHub)
	if !s.Capped || s.RetryAfter != 10*time.Second {
		t.Fatalf("got %+v; want capped at 10s", s)
	}
	for _, q := range s.Quotas {
		if q.Reset != 10*time.Second {
			t.Fatalf("quota %v not capped", q)
		}
	}
}

func TestDialectsConcurrent(t *testing.T) {
	h := hdr("x-ratelimit-reset-tokens", "6m0s", "X-Shopify-Shop-Api-Call-Limit", "32/40", "Sforce-Limit-Info", "api-usage=18/5000")
	want := header.Parse(429, h, time.Unix(0, 0), 0, allDialects...)
	done := make(chan header.Signal)
	for range 8 {
		go func() { done <- header.Parse(429, h, time.Unix(0, 0), 0, allDialects...) }()
	}
	for range 8 {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Fatalf("concurrent result %+v differs from %+v", got, want)
		}
	}
}

// TestDialectsNoHeadersAllocs guards the common case: a dialect run on a
// response without its fields allocates nothing.
func TestDialectsNoHeadersAllocs(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Date": {"Mon, 05 Aug 2019 09:27:05 GMT"}}
	now := time.Unix(1700000000, 0)
	var s header.Signal
	for i, d := range allDialects {
		for _, status := range []int{http.StatusOK, http.StatusForbidden, http.StatusTooManyRequests} {
			if n := testing.AllocsPerRun(100, func() { d.Parse(status, h, now, &s) }); n != 0 {
				t.Errorf("dialect %d, status %d: %v allocations, want 0", i, status, n)
			}
		}
	}
}

// checkDialectSignal asserts the invariants every dialect must keep once
// header.Parse has normalised the result.
func checkDialectSignal(t *testing.T, s header.Signal, maxWait time.Duration) {
	t.Helper()
	if s.RetryAfter < 0 || s.RetryAfter > maxWait {
		t.Fatalf("RetryAfter %v outside [0, %v]", s.RetryAfter, maxWait)
	}
	for _, q := range s.Quotas {
		if q.Reset < 0 || q.Reset > maxWait || q.Remaining < 0 || q.Limit < 0 || q.Window < 0 {
			t.Fatalf("bad quota %v", q)
		}
	}
}

func FuzzGitHubDiscordStripe(f *testing.F) {
	f.Add(403, "0", "1372700873", "", "shared", "true")
	f.Add(429, "4000", "", "", "", "false")
	f.Add(403, "", "", "30", "global", "maybe")
	f.Fuzz(func(t *testing.T, status int, remaining, reset, retryAfter, scope, flag string) {
		h := http.Header{
			"X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {reset}, "Retry-After": {retryAfter},
			"X-Ratelimit-Scope": {scope}, "X-Ratelimit-Global": {flag}, "X-Ratelimit-Bucket": {scope},
			"Stripe-Rate-Limited-Reason": {scope}, "Stripe-Should-Retry": {flag},
		}
		s := header.Parse(status, h, time.Unix(1372700800, 0), time.Minute, providers.GitHub, providers.Discord, providers.Stripe)
		checkDialectSignal(t, s, time.Minute)
		if (status == 429 || status == 403) && s.Limited && s.HasRetryAfter && s.RetryAfter > time.Minute {
			t.Fatalf("uncapped wait %v", s.RetryAfter)
		}
	})
}
