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
	providers.Discord, providers.Stripe, providers.Salesforce, providers.HubSpot, providers.Twilio}

// TestDialectNames: each preset's dialect names itself, with the preset's
// Name, in a response holding one of its provider's fields, and in no
// other: not in one carrying only the standard fields (which many
// providers send), nor in another provider's.
func TestDialectNames(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	standard := hdr("Retry-After", "2", "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Used", "100", "X-RateLimit-Reset", "1700000060", "RateLimit", `"default";r=0;t=5`,
		"RateLimit-Policy", `"default";q=100;w=60`, "X-Should-Retry", "true")
	cases := []struct {
		preset providers.Preset
		own    http.Header // one of the provider's fields, beside the standard ones
	}{
		{providers.OpenAIPreset(providers.LLMConfig{RPM: 60}), hdr("x-ratelimit-remaining-requests", "59")},
		{providers.AnthropicPreset(providers.LLMConfig{RPM: 50}), hdr("anthropic-ratelimit-requests-remaining", "49")},
		{providers.ShopifyPreset(providers.ShopifyConfig{}), hdr("X-Shopify-Shop-Api-Call-Limit", "40/40")},
		{providers.GitHubPreset(providers.GitHubConfig{}), hdr("x-ratelimit-resource", "core")},
		{providers.DiscordPreset(providers.DiscordConfig{}), hdr("X-RateLimit-Bucket", "abcd1234")},
		{providers.StripePreset(providers.StripeConfig{}), hdr("Stripe-Rate-Limited-Reason", "global-rate")},
		{providers.SalesforcePreset(providers.SalesforceConfig{}), hdr("Sforce-Limit-Info", "api-usage=5000/5000")},
		{providers.HubSpotPreset(providers.HubSpotConfig{}), hdr("X-HubSpot-RateLimit-Remaining", "0")},
		{providers.TwilioPreset(providers.TwilioConfig{}), hdr("Twilio-Concurrent-Requests", "100")},
	}
	with := func(own http.Header) http.Header {
		h := standard.Clone()
		for k, v := range own {
			h[k] = v
		}
		return h
	}
	for _, c := range cases {
		t.Run(c.preset.Name, func(t *testing.T) {
			d := c.preset.Dialect
			if d == nil {
				t.Fatal("the preset has no dialect")
			}
			for _, status := range []int{http.StatusOK, http.StatusForbidden, http.StatusTooManyRequests} {
				if got := header.Parse(status, with(c.own), now, 0, d).Dialect; got != c.preset.Name {
					t.Errorf("status %d, with %v: Dialect %q, want %q", status, c.own, got, c.preset.Name)
				}
				if got := header.Parse(status, standard, now, 0, d).Dialect; got != "" {
					t.Errorf("status %d, standard fields only: Dialect %q, want none", status, got)
				}
				for _, other := range cases {
					if other.preset.Name == c.preset.Name {
						continue
					}
					if got := header.Parse(status, with(other.own), now, 0, d).Dialect; got != "" {
						t.Errorf("status %d, %s's %v: Dialect %q, want none", status, other.preset.Name, other.own, got)
					}
				}
			}
		})
	}
}

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
