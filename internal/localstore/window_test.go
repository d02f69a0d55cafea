package localstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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

// TestWindowBucketsCapAndCount checks that a feedback cap slower than the
// rule paces a window bucket as a GCRA constraint of burst 1 beside its
// window, and that the bucket is counted while capped, as a leaky bucket
// is.
func TestWindowBucketsCapAndCount(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingLog, store.SlidingCounter} {
		c := fakeclock.New(time.Unix(1_700_000_000, 0))
		s := New(c)
		b := store.Bucket{Key: "w", Rule: "w", Algorithm: alg, Burst: 10, Period: time.Second, Interval: 100 * time.Millisecond, Cost: 1, Sent: 2}
		if _, err := s.Limit(ctx, b, store.Cap{Rate: 2, Span: time.Minute}); err != nil {
			t.Fatal(err)
		}
		for i, want := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
			r, err := s.Reserve(ctx, []store.Bucket{b}, time.Minute)
			if err != nil || !r.OK {
				t.Fatalf("%v: request %d: %+v, %v", alg, i, r, err)
			}
			if r.Wait != want {
				t.Fatalf("%v: request %d waits %v under a cap of 2/s, want %v", alg, i, r.Wait, want)
			}
			if got := r.Count(0); got != 1+2*int64(i+1) {
				t.Fatalf("%v: request %d counted %d, want %d", alg, i, got, 1+2*int64(i+1))
			}
		}
		// A cap of 0 counts only: the window's quota goes at once.
		s2 := New(c)
		if _, err := s2.Limit(ctx, b, store.Cap{Rate: 0, Span: time.Minute}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if r, err := s2.Reserve(ctx, []store.Bucket{b}, 0); err != nil || !r.OK || r.Count(0) == 0 {
				t.Fatalf("%v: uncapped request %d: %+v, %v", alg, i, r, err)
			}
		}
	}
}

// TestWindowBucketsAreSwept checks that window state goes with the sweep
// once it equals a new bucket.
func TestWindowBucketsAreSwept(t *testing.T) {
	ctx := context.Background()
	c := fakeclock.New(time.Unix(1_700_000_000, 0))
	s := New(c)
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingLog, store.SlidingCounter} {
		b := store.Bucket{Key: fmt.Sprint("w", int(alg)), Rule: "w", Algorithm: alg, Burst: 10, Period: time.Second, Interval: 100 * time.Millisecond, Cost: 1}
		if _, err := s.Reserve(ctx, []store.Bucket{b}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n != 3 {
		t.Fatalf("Len %d, want 3", n)
	}
	c.Advance(store.SweepEvery + 3*time.Second)
	b := store.Bucket{Key: "other", Rule: "other", Interval: time.Second, Burst: 1, Cost: 1}
	if _, err := s.Reserve(ctx, []store.Bucket{b}, 0); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("Len %d after the sweep, want 1 (the new bucket)", n)
	}
}

// lockedClock is a clock that records whether it was read without its
// store's lock held.
type lockedClock struct {
	*fakeclock.Clock
	s        *Store
	unlocked atomic.Int64
}

func (c *lockedClock) Now() time.Time {
	if c.s != nil && c.s.mu.TryLock() {
		c.s.mu.Unlock()
		c.unlocked.Add(1)
	}
	return c.Clock.Now()
}

// TestDecisionsInTheOrderOfTheirInstants: every call reads its instant
// with the store's lock held, so that calls are decided in the order of
// their instants. Read before the lock, a caller overtaken on its way to
// it decided at an instant before the sliding log's newest entry, and a
// strict caller (maxWait 0) with room in its window was refused for the
// microseconds between: which the second half of the test shows, by
// reading the clock 5µs back.
func TestDecisionsInTheOrderOfTheirInstants(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 500_000_000)
	for _, alg := range []store.Algorithm{store.SlidingLog, store.FixedWindow, store.SlidingCounter, store.LeakyBucket, store.TokenBucket} {
		c := &lockedClock{Clock: fakeclock.New(start)}
		s := New(c)
		c.s = s
		b := store.Bucket{Key: "w", Rule: "w", Algorithm: alg, Burst: 100, Period: time.Second, Interval: 10 * time.Millisecond, Cost: 1}
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				r, err := s.Reserve(ctx, []store.Bucket{b}, 0)
				if err != nil || !r.OK {
					t.Errorf("%v: %+v, %v; want admitted at once", alg, r, err)
					return
				}
				_ = r.Undo.Cancel(ctx)
			})
		}
		wg.Wait()
		if _, err := s.Limit(ctx, b, store.Cap{Rate: 1000, Span: time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := s.Pause(ctx, []store.Bucket{b}, 0); err != nil {
			t.Fatal(err)
		}
		if n := c.unlocked.Load(); n > 0 {
			t.Errorf("%v: the clock was read %d times without the lock", alg, n)
		}
	}
	// What an instant read out of order did: a strict request with room,
	// refused for the 5µs to the log's newest entry.
	c := fakeclock.New(start)
	s := New(c)
	b := store.Bucket{Key: "w", Rule: "w", Algorithm: store.SlidingLog, Burst: 100, Period: time.Second, Interval: 10 * time.Millisecond, Cost: 1}
	if r, _ := s.Reserve(ctx, []store.Bucket{b}, 0); !r.OK {
		t.Fatal("the first request was refused")
	}
	c.Set(start.Add(-5 * time.Microsecond))
	if r, _ := s.Reserve(ctx, []store.Bucket{b}, 0); r.OK || r.Wait != 5*time.Microsecond {
		t.Fatalf("a request decided 5µs before the newest entry: %+v; want refused for 5µs", r)
	}
}
