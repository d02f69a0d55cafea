package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
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

// A rule's lateness is half its headroom of the Period at every rate (no
// longer floored at one interval), at least minLateness, and one interval
// for a rule without headroom.
func TestLatenessFor(t *testing.T) {
	tests := []struct {
		name     string
		l        Limit
		headroom float64
		want     time.Duration
	}{
		{"fast rule: half the headroom", Limit{Rate: 100, Period: time.Second}, 0.05, 25 * time.Millisecond},
		{"slow rule: still half the headroom, not its 42 ms interval", Limit{Rate: 25, Period: time.Second}, 0.05, 25 * time.Millisecond},
		{"one a second: not its 1.05 s interval", Limit{Rate: 1, Period: time.Second}, 0.05, 25 * time.Millisecond},
		{"hourly quota", Limit{Rate: 5000, Period: time.Hour}, 0.05, 90 * time.Second},
		{"tiny headroom: the timer's jitter", Limit{Rate: 100, Period: time.Second}, 0.001, minLateness},
		{"no headroom: one interval", Limit{Rate: 10, Period: time.Second}, 0, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := latenessFor(tt.l, tt.l.interval(tt.headroom), tt.headroom); got != tt.want {
				t.Fatalf("latenessFor = %v, want %v", got, tt.want)
			}
		})
	}
}

// A waiter's tolerance leaves each booked bucket its lateness in all: the
// whole of it in the bucket that set the slot (and in a window bucket,
// booked at the departure too), the half a lead may not have taken in the
// others; a deferred bucket, booked when the waiter leaves, asks nothing.
func TestWakeTolerance(t *testing.T) {
	limiting := store.Bucket{Key: "endpoint", Lateness: 40 * time.Millisecond}
	ahead := store.Bucket{Key: "global", Lateness: 30 * time.Millisecond}
	window := store.Bucket{Key: "window", Lateness: 20 * time.Millisecond, Algorithm: store.FixedWindow}
	tests := []struct {
		name string
		r    store.Reservation
		want time.Duration
	}{
		{"one bucket", store.Reservation{Buckets: []store.Bucket{limiting}}, 40 * time.Millisecond},
		{"another bucket booked ahead", store.Reservation{Buckets: []store.Bucket{limiting, ahead}}, 15 * time.Millisecond},
		{"the other bucket deferred", store.Reservation{Buckets: []store.Bucket{limiting, ahead}, Deferred: []int{1}}, 40 * time.Millisecond},
		{"a window bucket, booked at the departure", store.Reservation{Buckets: []store.Bucket{limiting, window}}, 20 * time.Millisecond},
		{"the limiter second", store.Reservation{Buckets: []store.Bucket{ahead, limiting}, Limiter: 1}, 15 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wakeTolerance(&tt.r); got != tt.want {
				t.Fatalf("wakeTolerance = %v, want %v", got, tt.want)
			}
		})
	}
}
