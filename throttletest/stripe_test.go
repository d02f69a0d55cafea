package throttletest_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// resources are eight Stripe endpoints (names without digits, which
// providers.StripeEndpoint would read as object IDs).
var resources = []string{"customers", "charges", "invoices", "products", "prices", "refunds", "payouts", "events"}

func TestStripeAnswers(t *testing.T) {
	t.Run("admitted", func(t *testing.T) {
		h, _ := newHandler(t, throttletest.Stripe(throttletest.StripeConfig{}))
		resp := serve(h, "GET", "/v1/customers", nil, "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Request-Id") == "" || resp.Header.Get("Stripe-Rate-Limited-Reason") != "" {
			t.Errorf("status %d, header %v: want 200 with a Request-Id and no reason", resp.StatusCode, resp.Header)
		}
	})
	cases := []struct {
		name   string
		config throttletest.StripeConfig
		path   func(i int) string
		quota  int
		reason string
	}{
		// 100 requests over 8 endpoints stay under 25 per endpoint.
		{"global-live", throttletest.StripeConfig{}, func(i int) string { return "/v1/" + resources[i%8] }, 100, "global-rate"},
		{"global-test", throttletest.StripeConfig{Test: true}, func(i int) string { return "/v1/" + resources[i%8] }, 25, "global-rate"},
		// One endpoint, IDs varying: 25 then endpoint-rate.
		{"endpoint", throttletest.StripeConfig{}, func(i int) string { return "/v1/customers/cus_" + strconv.Itoa(i) }, 25, "endpoint-rate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, _ := newHandler(t, throttletest.Stripe(c.config))
			auth := http.Header{"Authorization": {"Bearer sk_test_a"}}
			for i := range c.quota {
				if resp := serve(h, "GET", c.path(i), auth, ""); resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
				}
			}
			resp := serve(h, "GET", c.path(c.quota), auth, "")
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("request %d: status %d, want 429", c.quota+1, resp.StatusCode)
			}
			if got := resp.Header.Get("Stripe-Rate-Limited-Reason"); got != c.reason {
				t.Errorf("Stripe-Rate-Limited-Reason %q, want %q", got, c.reason)
			}
			if got := resp.Header.Get("Retry-After"); got != "" {
				t.Errorf("Retry-After %q: Stripe sends none", got)
			}
			sig := header.Parse(resp.StatusCode, resp.Header, t0, 0, providers.Stripe)
			if !sig.Limited || sig.Reason != c.reason || sig.HasRetryAfter {
				t.Errorf("the client reads %+v: want Limited, Reason %q, no wait", sig, c.reason)
			}
			e, _ := decode(t, resp)["error"].(map[string]any)
			if e["type"] != "invalid_request_error" || e["code"] != "rate_limit" || e["message"] == "" {
				t.Errorf("error body %v, want Stripe's rate_limit error", e)
			}
			// Another account has its own quota.
			if resp := serve(h, "GET", c.path(0), http.Header{"Authorization": {"Bearer sk_test_b"}}, ""); resp.StatusCode != http.StatusOK {
				t.Errorf("another account: status %d, want 200", resp.StatusCode)
			}
		})
	}
}

func TestStripeConcurrency(t *testing.T) {
	for _, c := range []struct {
		name   string
		config throttletest.StripeConfig
		second string
		reason string
	}{
		{"global", throttletest.StripeConfig{Concurrency: 1}, "/v1/charges", "global-concurrency"},
		{"endpoint", throttletest.StripeConfig{EndpointConcurrency: 1}, "/v1/customers", "endpoint-concurrency"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The first request is held in its handler while the second
			// arrives.
			held, release := make(chan struct{}), make(chan struct{})
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/customers" && r.Header.Get("X-Hold") != "" {
					close(held)
					<-release
				}
			})
			h, _ := newHandler(t, throttletest.Stripe(c.config), throttletest.WithHandler(next))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(h, "GET", "/v1/customers", http.Header{"X-Hold": {"1"}}, "")
			}()
			<-held
			resp := serve(h, "GET", c.second, nil, "")
			close(release)
			wg.Wait()
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Stripe-Rate-Limited-Reason") != c.reason {
				t.Fatalf("status %d, reason %q: want 429 %s", resp.StatusCode, resp.Header.Get("Stripe-Rate-Limited-Reason"), c.reason)
			}
			sig := header.Parse(resp.StatusCode, resp.Header, t0, 0, providers.Stripe)
			if !sig.Concurrent {
				t.Errorf("the client reads %+v: want Concurrent", sig)
			}
			// Released, the slot is free again.
			if resp := serve(h, "GET", c.second, nil, ""); resp.StatusCode != http.StatusOK {
				t.Errorf("after the release: status %d, want 200", resp.StatusCode)
			}
			if rep := h.Report(); rep.MaxInFlight != 1 || rep.RefusedTotal() != 1 {
				t.Errorf("report: most in flight %d, refused %v", rep.MaxInFlight, rep.Refused)
			}
		})
	}
}
