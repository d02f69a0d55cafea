package throttle

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

// TestWindowWaitersLeaveInTheirWindow: a window's quota booked at one
// instant (requests asked for in a window's edge, booked at the next
// window's start) leaves in that window, for the fixed window and the
// sliding counter alike, while the requests beyond the quota queue in
// the window after. The queue paces a leaky bucket's waiters by the
// interval; a sliding counter's paced so would leave late, and, unable to
// give back a slot with bookings behind it, queue a window later (see
// waitQueue): 1 of the 19 left in its window so. 24 requests at 20/s (a
// quota of 19 with the headroom) are asked 15 ms before a Unix second,
// inside the edge of 20 ms; the clock then runs from timer to timer.
func TestWindowWaitersLeaveInTheirWindow(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingCounter} {
		t.Run(a.String(), func(t *testing.T) {
			boundary := time.Unix(1_700_000_000, 0)
			clk := fakeclock.New(boundary.Add(-15 * time.Millisecond))
			tr, departures := windowAt20(t, clk, a)
			const total, quota = 24, 19
			var left atomic.Int64
			errs := make(chan error, total)
			for range total {
				go func() {
					errs <- roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/"))
					left.Add(1)
					clk.Wake()
				}()
			}
			for left.Load() < total {
				// Quiet: every request left or asleep on a timer.
				l := left.Load()
				clk.WaitTimersOr(total-int(l), func() bool { return left.Load() != l })
				if left.Load() == l && !clk.AdvanceToNext() {
					t.Fatalf("%d of %d requests left, none is asleep", l, total)
				}
			}
			for range total {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			in := 0
			departed := departures()
			for _, d := range departed {
				if !d.Before(boundary) && d.Before(boundary.Add(time.Second)) {
					in++
				}
			}
			if in != quota {
				t.Errorf("%d requests left in the window after the boundary, want its quota %d (departures: %v)", in, quota, departed)
			}
		})
	}
}

// TestWindowWaiterLateNearTheEdge: a sliding counter's waiter slotted near
// its window's end (the last slot the previous window's weight leaves,
// 52.6 ms before the end at 20/s) that wakes 45 ms late, as after a stall,
// books again in the next window instead of leaving 7 ms before the
// boundary, where its transit would take it across: a waiter of a window
// with edges is late from half an edge (10 ms of the 20 ms edge), not
// from the interval (51 ms), which at low rates is longer than the edge.
func TestWindowWaiterLateNearTheEdge(t *testing.T) {
	const p = time.Second
	w0 := time.Unix(1_700_000_000, 0)
	w1, w2 := w0.Add(p), w0.Add(2*p)
	clk := fakeclock.New(w0.Add(25 * time.Millisecond))
	tr, departures := windowAt20(t, clk, SlidingCounter)
	const quota = 19 // 20 less the 2 % headroom
	for range quota {
		if err := roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/")); err != nil {
			t.Fatal(err)
		}
	}
	// In the next window the full previous one slides out at one request
	// every Period/19: slots at 52.6 ms, 105.3 ms, ..., 947.4 ms.
	for k := 1; k <= quota-1; k++ {
		done := make(chan error, 1)
		go func() {
			done <- roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/"))
			clk.Wake()
		}()
		clk.WaitTimers(1)
		if k < quota-1 {
			clk.AdvanceToNext()
		} else {
			last := w1.Add(p - p/quota) // the window's last slot, to the µs below
			clk.Set(last.Add(45 * time.Millisecond))
		}
		// Run the clock from timer to timer until the request is done.
		for len(done) == 0 {
			clk.WaitTimersOr(1, func() bool { return len(done) > 0 })
			if len(done) == 0 {
				clk.AdvanceToNext()
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	departed := departures()
	late := departed[len(departed)-1]
	if late.Before(w2) {
		t.Errorf("the late waiter left %v before the boundary, want it booked again in the next window", w2.Sub(late))
	}
	for _, d := range departed {
		if off := d.Sub(d.Truncate(p)); off >= p-10*time.Millisecond {
			t.Errorf("a request left %v before its window's end, within half its edge", p-off)
		}
	}
}

// windowAt20 returns a Transport on clk with one rule of algorithm a at
// 20/s (a quota of 19 a second with the headroom), and a func that
// returns the times its requests reached the base transport so far.
func windowAt20(t *testing.T, clk *fakeclock.Clock, a Algorithm) (*Transport, func() []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var departed []time.Time
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		departed = append(departed, clk.Now())
		mu.Unlock()
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(clk), WithRules(Rule{
		Name: "r", Algorithm: a, Limit: Limit{Rate: 20, Period: time.Second},
	}))
	return tr, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), departed...)
	}
}
