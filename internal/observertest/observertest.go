// Package observertest holds scenarios that make a Transport's events for
// the tests of the observers built on them, so that the root's exporters
// (otelthrottle and promthrottle, each in its own module) read the same
// events. Test-only: it imports testing.
package observertest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

// Rule is the name of the scenarios' rule.
const Rule = "api"

// RateLimitedByDialect sends three requests through a Transport observed
// by o, with the Stripe dialect and no retry, each answered 429: two
// carrying Stripe-Rate-Limited-Reason (global-rate, then endpoint-rate),
// which the dialect recognises, and one with a bare Retry-After, which no
// dialect does. It fails t if a request fails. o has then seen three
// rate-limited events, two of them of the dialect "stripe".
func RateLimitedByDialect(t testing.TB, o throttle.Observer) {
	t.Helper()
	headers := []http.Header{
		{"Stripe-Rate-Limited-Reason": {"global-rate"}},
		{"Stripe-Rate-Limited-Reason": {"endpoint-rate"}},
		{"Retry-After": {"0"}},
	}
	var mu sync.Mutex
	n := 0
	tr, err := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		h := headers[n%len(headers)]
		n++
		mu.Unlock()
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
	}), throttle.WithObserver(o), throttle.WithDialects(providers.Stripe), throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}),
		throttle.WithRules(throttle.Rule{Name: Rule, Limit: throttle.Limit{Rate: 1000, Period: time.Second, Burst: 10}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Close() }()
	for range headers {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example/v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
