package middleware_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// TestQueue: with WithMaxWait a request over the rate waits its slot on
// the clock; one whose slot lies beyond the maximum wait or its deadline
// is refused at once, booking nothing; a cancelled wait gives its slot
// back.
func TestQueue(t *testing.T) {
	rule := throttle.Rule{Name: "drip", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}
	newL := func(t *testing.T) (*middleware.Limiter, interface {
		Advance(time.Duration)
		WaitTimers(int)
		Timers() int
	}) {
		clk := newClock()
		return mustNew(t, middleware.WithClock(clk), middleware.WithMaxWait(2500*time.Millisecond), middleware.WithRules(rule)), clk
	}

	t.Run("waits its slot", func(t *testing.T) {
		l, clk := newL(t)
		serve(l, nil, get("/")) // takes the burst
		done := make(chan middleware.Decision, 1)
		h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			d, _ := middleware.DecisionFrom(r.Context())
			done <- d
		})
		go serve(l, h, get("/"))
		clk.WaitTimers(1)
		select {
		case <-done:
			t.Fatal("admitted before its slot")
		default:
		}
		clk.Advance(time.Second)
		if d := <-done; !d.Allowed || d.Waited != time.Second {
			t.Errorf("decision %+v, want admitted after waiting 1s", d)
		}
	})

	t.Run("beyond the max wait: refused at once, nothing booked", func(t *testing.T) {
		l, clk := newL(t)
		serve(l, nil, get("/"))
		ch := make(chan struct{}, 2)
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ch <- struct{}{} })
		go serve(l, h, get("/")) // waits 1s
		clk.WaitTimers(1)
		go serve(l, h, get("/")) // waits 2s
		clk.WaitTimers(2)
		w := serve(l, nil, get("/")) // would wait 3s > 2.5s
		if w.Code != 429 || w.Header().Get("Retry-After") != "3" {
			t.Errorf("third waiter: %d Retry-After %q, want 429 and 3", w.Code, w.Header().Get("Retry-After"))
		}
		clk.Advance(2 * time.Second)
		<-ch
		<-ch
		// The refused request booked nothing: the next slot is at 3s.
		clk.Advance(time.Second)
		if d, err := l.Take(context.Background(), "", "", 1); err != nil || !d.Allowed {
			t.Errorf("after the waiters: %+v, %v; want admitted at once", d, err)
		}
	})

	t.Run("beyond the deadline: refused at once", func(t *testing.T) {
		l, clk := newL(t)
		serve(l, nil, get("/"))
		ctx, cancel := context.WithDeadline(context.Background(), epoch.Add(500*time.Millisecond))
		defer cancel()
		w := serve(l, nil, get("/").WithContext(ctx))
		if w.Code != 429 {
			t.Errorf("slot past the deadline: %d, want 429", w.Code)
		}
		if n := clk.Timers(); n != 0 {
			t.Errorf("%d timers, want none: it must not wait", n)
		}
		clk.Advance(time.Second)
		if d, err := l.Take(context.Background(), "", "", 1); err != nil || !d.Allowed {
			t.Errorf("its slot: %+v, %v; want admitted (nothing booked)", d, err)
		}
	})

	t.Run("cancelled wait gives its slot back", func(t *testing.T) {
		l, clk := newL(t)
		serve(l, nil, get("/"))
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan int, 1)
		go func() { res <- serve(l, nil, get("/").WithContext(ctx)).Code }()
		clk.WaitTimers(1)
		cancel()
		if code := <-res; code != 429 {
			t.Errorf("cancelled waiter: %d, want 429", code)
		}
		clk.Advance(time.Second)
		// Take never waits: it is admitted only if the slot came back.
		if d, err := l.Take(context.Background(), "", "", 1); err != nil || !d.Allowed {
			t.Errorf("the slot given back: %+v, %v; want admitted", d, err)
		}
	})
}
