package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

// A waiter that wakes long after its slot, as after a stall of the process,
// books a new slot instead of leaving on the one it missed; a waiter late by
// less than its tolerance leaves on its slot.
func TestTransportLateWaiterRebooks(t *testing.T) {
	const iv = 100 * time.Millisecond // 10/s, burst 1: one interval is the tolerance
	tests := []struct {
		name    string
		late    time.Duration
		wantTAT time.Duration // after epoch
	}{
		// The second request's slot is epoch+100ms; its booking moved the
		// TAT to epoch+200ms.
		{name: "late within one interval leaves on its slot", late: 50 * time.Millisecond, wantTAT: 2 * iv},
		// Woken at epoch+350ms, it books again: the bucket has room at
		// once, and its TAT moves to now + one interval.
		{name: "late by more than an interval books again", late: 250 * time.Millisecond, wantTAT: 350*time.Millisecond + iv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New(epoch)
			tr := mustNew(t, okBase, WithClock(clk), WithHeadroom(0), WithRules(Rule{
				Name: "r", Limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
			}))
			if err := roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/")); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- roundTrip(tr, newReq(t, context.Background(), http.MethodGet, "http://x/")) }()
			clk.WaitTimers(1)
			clk.Advance(iv + tt.late) // the timer fires late, all at once
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(localOf(t, tr).TAT("r") - epoch.UnixNano()); got != tt.wantTAT {
				t.Fatalf("TAT = epoch+%v, want epoch+%v", got, tt.wantTAT)
			}
		})
	}
}
