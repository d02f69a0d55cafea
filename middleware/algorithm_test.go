package middleware_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// TestAlgorithms: each algorithm admits its quota, refuses the next with
// a Retry-After, and admits again once its bucket or window has room; its
// headers tell the room left.
func TestAlgorithms(t *testing.T) {
	tests := []struct {
		alg   throttle.Algorithm
		burst int
		// after is how long after the quota the next request is admitted,
		// and remaining what is then left.
		after     time.Duration
		remaining string
	}{
		{throttle.LeakyBucket, 5, 12 * time.Second, "0"},
		{throttle.TokenBucket, 5, 12 * time.Second, "0"},
		{throttle.FixedWindow, 0, time.Minute, "4"},
		{throttle.SlidingLog, 0, time.Minute, "4"},
		{throttle.SlidingCounter, 0, 72 * time.Second, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.alg.String(), func(t *testing.T) {
			clk := newClock()
			l := mustNew(t, middleware.WithClock(clk), middleware.WithRules(throttle.Rule{
				Name: "r", Algorithm: tt.alg, Limit: throttle.Limit{Rate: 5, Period: time.Minute, Burst: tt.burst},
			}))
			for i := range 5 {
				w := serve(l, nil, get("/"))
				if w.Code != 200 {
					t.Fatalf("request %d: %d", i, w.Code)
				}
				if got, want := w.Header().Get("X-RateLimit-Remaining"), strconv.Itoa(4-i); got != want {
					t.Errorf("request %d: remaining %s, want %s", i, got, want)
				}
			}
			w := serve(l, nil, get("/"))
			if w.Code != 429 || w.Header().Get("Retry-After") == "" || w.Header().Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("over the quota: %d %v", w.Code, w.Header())
			}
			clk.Advance(tt.after - time.Millisecond)
			if w := serve(l, nil, get("/")); w.Code != 429 {
				t.Errorf("just before its room: %d, want 429", w.Code)
			}
			clk.Advance(time.Millisecond)
			w = serve(l, nil, get("/"))
			if w.Code != 200 {
				t.Fatalf("after %v: %d, want 200", tt.after, w.Code)
			}
			if got := w.Header().Get("X-RateLimit-Remaining"); got != tt.remaining {
				t.Errorf("after %v: remaining %s, want %s", tt.after, got, tt.remaining)
			}
		})
	}
}
