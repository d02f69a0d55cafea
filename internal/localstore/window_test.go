package localstore

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// TestWindowBucketsBetweenMicroseconds checks that a window bucket decides
// at the clock's microsecond: a request with room departs at once even
// when the clock stands between two microseconds, so a maxWait of 0 books
// it, and a request that must wait for the next window waits until its
// boundary exactly.
func TestWindowBucketsBetweenMicroseconds(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingLog, store.SlidingCounter} {
		c := fakeclock.New(time.Unix(1_700_000_000, 400_500)) // 400.5µs into a second
		s := New(c)
		b := store.Bucket{Key: "w", Rule: "w", Algorithm: alg, Burst: 2, Period: time.Second, Interval: 500 * time.Millisecond, Cost: 1}
		for i := range 2 {
			r, err := s.Reserve(ctx, []store.Bucket{b}, 0)
			if err != nil || !r.OK || r.Wait != 0 {
				t.Fatalf("%v: request %d: %+v, %v; want booked at once", alg, i, r, err)
			}
		}
		r, err := s.Reserve(ctx, []store.Bucket{b}, 2*time.Second)
		if err != nil || !r.OK {
			t.Fatalf("%v: third request: %+v, %v", alg, r, err)
		}
		if alg == store.FixedWindow && r.Wait != time.Second-400_500 {
			t.Fatalf("%v: third request waits %v, want %v (the next window)", alg, r.Wait, time.Second-400_500)
		}
		if r.Wait <= 0 {
			t.Fatalf("%v: third request waits %v with the quota spent", alg, r.Wait)
		}
	}
}
