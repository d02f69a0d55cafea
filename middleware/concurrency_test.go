package middleware_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// TestConcurrency: a rule's Concurrency caps the requests of a partition
// in the handler at once; the next is refused 429 until one returns.
func TestConcurrency(t *testing.T) {
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(
		throttle.Rule{Name: "inflight", Concurrency: 2, Key: middleware.KeyHeader("X-Account")},
	))
	release := make(chan struct{})
	entered := make(chan middleware.Decision, 2)
	h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		d, _ := middleware.DecisionFrom(r.Context())
		entered <- d
		<-release
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { serve(l, h, get("/", "X-Account", "a")) })
	}
	for range 2 {
		if d := <-entered; d.Rules[0].Concurrency != 2 || d.Rules[0].InFlight < 1 {
			t.Errorf("admitted decision %+v", d.Rules[0])
		}
	}
	w := serve(l, nil, get("/", "X-Account", "a"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" || !contains(w.Body.String(), "concurrency_limited") {
		t.Errorf("third at once: %d %q %s, want 429 concurrency_limited", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if _, ok := w.Header()["Ratelimit-Policy"]; ok {
		t.Errorf("a RateLimit-Policy for a rule without a rate: %v", w.Header())
	}
	if w := serve(l, nil, get("/", "X-Account", "b")); w.Code != 200 {
		t.Errorf("another account: %d, want 200", w.Code)
	}
	close(release)
	wg.Wait()
	if w := serve(l, nil, get("/", "X-Account", "a")); w.Code != 200 {
		t.Errorf("after they returned: %d, want 200", w.Code)
	}
}

// TestConcurrencyWithRate: a refusal by the rate gives the concurrency
// slot back, and a full cap books no rate.
func TestConcurrencyWithRate(t *testing.T) {
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(
		throttle.Rule{Name: "both", Concurrency: 1, Limit: throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1}},
	))
	if w := serve(l, nil, get("/")); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := serve(l, nil, get("/"))
	if w.Code != 429 || !contains(w.Body.String(), "rate_limited") {
		t.Errorf("second: %d %s, want rate_limited", w.Code, w.Body)
	}
	if d, err := l.Take(t.Context(), "", "", 1); err != nil || d.Allowed {
		t.Errorf("Take: %+v %v, want refused", d, err)
	}
}

// TestDecide: Decide decides without writing, and its release frees the
// concurrency slot.
func TestDecide(t *testing.T) {
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(
		throttle.Rule{Name: "one", Concurrency: 1, Limit: throttle.Limit{Rate: 10, Period: time.Minute, Burst: 10}},
	))
	d, release := l.Decide(get("/"))
	if !d.Allowed || d.Remaining != 9 || d.Rules[0].InFlight != 1 {
		t.Fatalf("first: %+v", d)
	}
	if d2, _ := l.Decide(get("/")); d2.Allowed || d2.Reason != middleware.ReasonConcurrency {
		t.Errorf("second while the first is in flight: %+v", d2)
	}
	release()
	if d3, release3 := l.Decide(get("/")); !d3.Allowed || d3.Remaining != 8 {
		t.Errorf("after release: %+v", d3)
	} else {
		release3()
	}
}
