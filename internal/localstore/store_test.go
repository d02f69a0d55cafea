package localstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// epoch is where the fake clocks of the store tests start.
var epoch = time.Unix(0, t0)

func newTestStore() (*Store, *fakeclock.Clock) {
	c := fakeclock.New(epoch)
	return New(c), c
}

func mustReserve(t *testing.T, s *Store, bs []store.Bucket, maxWait time.Duration) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), bs, maxWait)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLocalStoreMultiBucket(t *testing.T) {
	ctx := context.Background()
	// A lateness of an hour books every bucket at once; the deferral of a
	// bucket whose slot comes too early has its own case below.
	fast := store.Bucket{Key: "fast", Rule: "fast", Interval: 10, Burst: 1, Cost: 1, Lateness: time.Hour}
	slow := store.Bucket{Key: "slow", Rule: "slow", Interval: 30, Burst: 1, Cost: 1, Lateness: time.Hour}
	bs := []store.Bucket{fast, slow}

	t.Run("a bucket whose slot comes before the departure by more than its lateness is deferred", func(t *testing.T) {
		s, _ := newTestStore()
		strictFast := fast
		strictFast.Lateness = 5
		mustReserve(t, s, []store.Bucket{strictFast, slow}, 0)
		r := mustReserve(t, s, []store.Bucket{strictFast, slow}, time.Hour)
		if !r.OK || r.Wait != 30 {
			t.Fatalf("got %+v; want ok after 30ns", r)
		}
		if rest := r.Rest(); len(rest) != 1 || rest[0].Key != "fast" {
			t.Fatalf("deferred %v, want the fast bucket", rest)
		}
		if got, want := s.TAT("fast"), t0+10; got != want {
			t.Fatalf("fast TAT now%+d, want it untouched at now%+d", got-t0, want-t0)
		}
		// Refunding the reservation leaves the deferred bucket alone.
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := s.TAT("fast"), t0+10; got != want {
			t.Fatalf("after refund fast TAT now%+d, want now%+d", got-t0, want-t0)
		}
	})

	t.Run("the slowest bucket sets the departure; each is booked at its own earliest time", func(t *testing.T) {
		s, _ := newTestStore()
		if r := mustReserve(t, s, bs, 0); !r.OK || r.Wait != 0 {
			t.Fatalf("first reservation %+v; want ok at once", r)
		}
		r := mustReserve(t, s, bs, time.Hour)
		if !r.OK || r.Wait != 30 || r.Limiter != 1 {
			t.Fatalf("got ok=%v wait=%v limiter=%d; want ok, 30ns, limiter 1 (slow)", r.OK, r.Wait, r.Limiter)
		}
		// The fast bucket is booked at its own earliest time, t0+10, so no
		// capacity of it goes unused while the slow one holds the request.
		if got, want := s.TAT("fast"), t0+10+10; got != want {
			t.Fatalf("fast TAT now%+d, want now%+d", got-t0, want-t0)
		}
		if got, want := s.TAT("slow"), t0+30+30; got != want {
			t.Fatalf("slow TAT now%+d, want now%+d", got-t0, want-t0)
		}
	})

	t.Run("limiter index names the slowest bucket", func(t *testing.T) {
		s, _ := newTestStore()
		mustReserve(t, s, []store.Bucket{fast, slow}, 0)
		if r := mustReserve(t, s, []store.Bucket{slow, fast}, time.Hour); r.Limiter != 0 || r.Wait != 30 {
			t.Fatalf("limiter %d wait %v; want 0, 30ns", r.Limiter, r.Wait)
		}
	})

	t.Run("all or nothing: a rejection books no bucket", func(t *testing.T) {
		s, _ := newTestStore()
		mustReserve(t, s, []store.Bucket{slow}, 0)
		before := s.TATs()
		r := mustReserve(t, s, bs, 20)
		if r.OK || r.Wait != 30 || r.Limiter != 1 {
			t.Fatalf("got %+v; want rejection needing 30ns from limiter 1", r)
		}
		if after := s.TATs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("store changed by a rejected reservation: %v → %v", before, after)
		}
		if _, ok := s.TATs()["fast"]; ok {
			t.Fatal("the fast bucket was created by a rejected reservation")
		}
	})

	t.Run("refund of the last booking restores every bucket", func(t *testing.T) {
		s, _ := newTestStore()
		mustReserve(t, s, bs, 0)
		before := s.TATs()
		r := mustReserve(t, s, bs, time.Hour)
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if after := s.TATs(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refund left %v, want %v", after, before)
		}
		if r2 := mustReserve(t, s, bs, time.Hour); r2.Wait != r.Wait {
			t.Fatalf("next request waits %v, want the refunded slot's %v", r2.Wait, r.Wait)
		}
	})

	t.Run("refund of a booking with later ones behind it changes nothing", func(t *testing.T) {
		s, _ := newTestStore()
		r1 := mustReserve(t, s, bs, time.Hour)
		afterR1 := s.TATs()
		r2 := mustReserve(t, s, bs, time.Hour)
		afterR2 := s.TATs()
		if err := r1.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.TATs(); fmt.Sprint(got) != fmt.Sprint(afterR2) {
			t.Fatalf("refund of a non-last booking changed the store: %v → %v", afterR2, got)
		}
		if err := r2.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.TATs(); fmt.Sprint(got) != fmt.Sprint(afterR1) {
			t.Fatalf("refund of the last booking left %v, want %v", got, afterR1)
		}
	})

	t.Run("refund only where the booking is still last", func(t *testing.T) {
		s, _ := newTestStore()
		r := mustReserve(t, s, bs, time.Hour)
		// Another request books the slow bucket only.
		mustReserve(t, s, []store.Bucket{slow}, time.Hour)
		slowBefore := s.TAT("slow")
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if s.TAT("fast") != r.Undo.(*localBooking).prev[0] {
			t.Fatalf("fast bucket not refunded")
		}
		if s.TAT("slow") != slowBefore {
			t.Fatalf("slow bucket refunded although a later booking sits behind it")
		}
	})
}

func TestLocalStorePause(t *testing.T) {
	ctx := context.Background()
	b := store.Bucket{Key: "k", Rule: "r", Interval: 10, Burst: 3, Cost: 1}
	s, c := newTestStore()
	if err := s.Pause(ctx, []store.Bucket{b}, 100); err != nil {
		t.Fatal(err)
	}
	// The pause holds the bucket shut for 100ns, then it refills from
	// empty: one request per interval, no burst.
	for i, want := range []time.Duration{100, 110, 120} {
		if r := mustReserve(t, s, []store.Bucket{b}, time.Hour); r.Wait != want {
			t.Fatalf("request %d waits %v, want %v", i, r.Wait, want)
		}
	}
	t.Run("a shorter pause does not shorten a longer one", func(t *testing.T) {
		before := s.TAT("k")
		if err := s.Pause(ctx, []store.Bucket{b}, 5); err != nil {
			t.Fatal(err)
		}
		if s.TAT("k") != before {
			t.Fatalf("TAT moved from %d to %d", before, s.TAT("k"))
		}
	})
	t.Run("a negative pause is no pause", func(t *testing.T) {
		c.Advance(time.Hour)
		if err := s.Pause(ctx, []store.Bucket{b}, -time.Hour); err != nil {
			t.Fatal(err)
		}
		if r := mustReserve(t, s, []store.Bucket{b}, 0); !r.OK {
			t.Fatalf("request after a negative pause rejected: %+v", r)
		}
	})
}

func TestLocalStoreSweep(t *testing.T) {
	iv := time.Millisecond
	key := func(i int) store.Bucket {
		return store.Bucket{Key: fmt.Sprint("k", i), Rule: "r", Interval: iv, Burst: 1, Cost: 1}
	}

	t.Run("idle buckets are dropped when the map doubles", func(t *testing.T) {
		s, c := newTestStore()
		for i := range store.SweepMinSize - 1 {
			mustReserve(t, s, []store.Bucket{key(i)}, 0)
		}
		c.Advance(iv) // every bucket is now idle
		mustReserve(t, s, []store.Bucket{key(-1)}, 0)
		if n := s.Len(); n != store.SweepMinSize {
			t.Fatalf("len %d before the map reaches the sweep size, want %d", n, store.SweepMinSize)
		}
		mustReserve(t, s, []store.Bucket{key(-2)}, 0) // reaches sweepMinSize: sweeps
		if n := s.Len(); n != 2 {
			t.Fatalf("len %d after the sweep, want 2 (the live bucket and the new one)", n)
		}
	})

	t.Run("idle buckets are dropped sweepEvery after the last sweep", func(t *testing.T) {
		s, c := newTestStore()
		for i := range 10 {
			mustReserve(t, s, []store.Bucket{key(i)}, 0)
		}
		c.Advance(store.SweepEvery)
		mustReserve(t, s, []store.Bucket{key(-1)}, 0)
		if n := s.Len(); n != 1 {
			t.Fatalf("len %d, want 1", n)
		}
	})

	t.Run("live buckets survive a sweep with their TAT", func(t *testing.T) {
		s, c := newTestStore()
		long := store.Bucket{Key: "long", Rule: "r", Interval: 2 * store.SweepEvery, Burst: 1, Cost: 1}
		mustReserve(t, s, []store.Bucket{long}, 0)
		tat := s.TAT("long")
		c.Advance(store.SweepEvery)
		mustReserve(t, s, []store.Bucket{key(1)}, 0)
		if s.Len() != 2 || s.TAT("long") != tat {
			t.Fatalf("live bucket lost by the sweep (len %d, tat %d want %d)", s.Len(), s.TAT("long"), tat)
		}
		if r := mustReserve(t, s, []store.Bucket{long}, time.Hour); r.Wait != store.SweepEvery {
			t.Fatalf("wait %v after the sweep, want %v", r.Wait, store.SweepEvery)
		}
	})
}

func TestLocalStoreDebt(t *testing.T) {
	ctx := context.Background()
	ms := time.Millisecond
	b := store.Bucket{Key: "k", Rule: "r", Interval: 10 * ms, Burst: 1, Cost: 1}
	s, c := newTestStore()
	limit := func(debt float64) {
		t.Helper()
		if _, err := s.Limit(ctx, b, store.Cap{Rate: 50, Span: time.Second, Debt: debt}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func() time.Duration {
		t.Helper()
		r := mustReserve(t, s, []store.Bucket{b}, time.Hour)
		return r.Wait
	}
	// An empty bucket capped at 50/s with a debt of 2: its next slot
	// comes two capped intervals (20 ms each) later.
	limit(2)
	if got := wait(); got != 40*ms {
		t.Fatalf("first slot after a debt of 2 waits %v, want 40ms", got)
	}
	// The same debt again, or a lower one, is paid: nothing moves.
	before := s.TAT("k")
	limit(2)
	limit(1)
	if s.TAT("k") != before {
		t.Fatalf("a debt paid moved the TAT from %d to %d", before, s.TAT("k"))
	}
	// A higher one pays only what it adds.
	limit(3)
	if got := s.TAT("k") - before; got != int64(20*ms) {
		t.Fatalf("a debt of 3 after 2 pushed the TAT %v, want 20ms", time.Duration(got))
	}
	// A count that lapsed starts its debt afresh.
	c.Advance(2 * time.Second)
	limit(1)
	if got := wait(); got != 20*ms {
		t.Fatalf("after the count lapsed, a debt of 1 waits %v, want 20ms", got)
	}
}

// TestLocalStoreCutPacesWhatBooksAfter: a success's cap (no Retime) paces
// only what books after it, cut or raise: the booked lead keeps its slots,
// so caps that wander never ratchet it later. A rejection's cap (Retime)
// that slows the bucket stretches the lead by the new interval over the
// old and returns that stretch; one that speeds it up moves nothing.
func TestLocalStoreCutPacesWhatBooksAfter(t *testing.T) {
	ctx := context.Background()
	ms := time.Millisecond
	b := store.Bucket{Key: "k", Rule: "r", Interval: 10 * ms, Burst: 1, Cost: 1}
	s, c := newTestStore()
	now := c.Now().UnixNano()
	for range 50 {
		mustReserve(t, s, []store.Bucket{b}, time.Hour)
	}
	limit := func(rate float64, retime bool) store.Stretch {
		t.Helper()
		st, err := s.Limit(ctx, b, store.Cap{Rate: rate, Span: 10 * time.Second, Retime: retime})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	lead := func() time.Duration { return time.Duration(s.TAT("k") - now) }
	if got := lead(); got != 500*ms {
		t.Fatalf("50 slots at 10 ms lead by %v, want 500ms", got)
	}
	for _, rate := range []float64{50, 80, 60, 40} {
		if st := limit(rate, false); st.Moves() || lead() != 500*ms {
			t.Fatalf("a success's cap of %v/s: lead %v, stretch %+v; want 500ms, none", rate, lead(), st)
		}
	}
	// The next booking takes the lead's end and books the one after it
	// at the cap's pace (40/s: 25 ms).
	if r := mustReserve(t, s, []store.Bucket{b}, time.Hour); r.Wait != 500*ms || lead() != 525*ms {
		t.Fatalf("the first booking after a cap of 40/s waits %v, lead %v; want 500ms, 525ms", r.Wait, lead())
	}
	// A rejection's cut from 40/s to 20/s doubles the lead.
	st := limit(20, true)
	if got := lead(); got != 1050*ms {
		t.Fatalf("a rejection's cut to 20/s: lead %v, want 1.05s", got)
	}
	if st.From != 0 || st.Ratio != 2 {
		t.Fatalf("a rejection's cut to 20/s returned %+v, want From 0, Ratio 2", st)
	}
	// And one that raises moves nothing.
	if st := limit(40, true); st.Moves() || lead() != 1050*ms {
		t.Fatalf("a rejection's raise: lead %v, stretch %+v; want 1.05s, none", lead(), st)
	}
}

// TestLocalStoreDebtPayBy: a debt due by a time (store.Cap.PayBy) pushes
// the next slot no further than that time, and not at all when the lead
// already reaches past it; the debt counts as paid either way.
func TestLocalStoreDebtPayBy(t *testing.T) {
	ctx := context.Background()
	ms := time.Millisecond
	b := store.Bucket{Key: "k", Rule: "r", Interval: 10 * ms, Burst: 1, Cost: 1}
	s, c := newTestStore()
	now := c.Now().UnixNano()
	limit := func(debt float64, by time.Duration) {
		t.Helper()
		if _, err := s.Limit(ctx, b, store.Cap{Rate: 50, Span: time.Second, Debt: debt, PayBy: by}); err != nil {
			t.Fatal(err)
		}
	}
	// A debt of 5 at 20 ms is 100 ms of push; due in 60 ms, 60 ms of it.
	limit(5, 60*ms)
	if got := time.Duration(s.TAT("k") - now); got != 60*ms {
		t.Fatalf("a debt of 5 due in 60ms pushed the TAT %v, want 60ms", got)
	}
	// More debt, due by a time the TAT already reaches: no push.
	limit(8, 40*ms)
	if got := time.Duration(s.TAT("k") - now); got != 60*ms {
		t.Fatalf("a debt due before the TAT pushed it to %v, want it left at 60ms", got)
	}
	// And it was paid: the same debt with no bound pushes nothing more.
	limit(8, 0)
	if got := time.Duration(s.TAT("k") - now); got != 60*ms {
		t.Fatalf("a debt paid pushed again, to %v", got)
	}
}
