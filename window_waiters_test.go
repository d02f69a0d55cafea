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
