package lease

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

var localT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type localResult struct {
	l   *Lease
	err error
}

func localAcquireAsync(l *Local, caps []Cap, maxWait time.Duration) chan localResult {
	ch := make(chan localResult, 1)
	go func() {
		ls, err := l.Acquire(context.Background(), caps, Normal, maxWait)
		ch <- localResult{ls, err}
	}()
	return ch
}

// TestLocalAdaptive: Lower drops the cap below the holders and it climbs
// back by one per period, waking a waiter with no release; Observe
// subtracts others' requests until its view fades.
func TestLocalAdaptive(t *testing.T) {
	clk := fakeclock.New(localT0)
	l := NewLocal(WithClock(clk), withLocalClimb(2*time.Second))
	c := Cap{Key: "acct", Rule: "twilio", Limit: 5}
	var held []*Lease
	for range 4 {
		h, err := l.Acquire(context.Background(), []Cap{c}, Normal, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	if got, _ := l.lower(context.Background(), c); got != 3 {
		t.Fatalf("Lower = %d, want 3", got)
	}
	held[0].Release()
	held[1].Release() // 2 held, cap 3
	h, err := l.Acquire(context.Background(), []Cap{c}, Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := localAcquireAsync(l, []Cap{c}, time.Minute)
	clk.WaitTimers(2) // maxWait and the climb
	clk.Advance(2 * time.Second)
	res := <-r
	if res.err != nil {
		t.Fatalf("not admitted by the climb: %v", res.err)
	}
	res.l.Release()
	h.Release()
	held[2].Release()
	held[3].Release()

	if got, _ := l.observe(context.Background(), c, 4); got != 1 {
		t.Fatalf("Observe with 4 others = %d, want 1", got)
	}
	clk.Advance(DefaultObserveTTL)
	if got, _ := l.observe(context.Background(), c, 0); got != 5 {
		t.Fatalf("cap %d after the view faded and the climb ended, want 5", got)
	}
}
