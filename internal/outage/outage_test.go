package outage

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/store"
)

var errFlaky = errors.New("flaky: connection refused")

// flakyStore is a store whose health the test controls: healthy, it
// delegates to the local store of internal/localstore, which decides as
// the Redis store does (and records each call's costs); failing, it
// returns errFlaky; stalled, it blocks until the call's context ends (or,
// with ignoreCtx, until the test unstalls it), like a SIGSTOPped Redis.
type flakyStore struct {
	inner *localstore.Store

	mu        sync.Mutex
	failing   bool
	stall     chan struct{} // non-nil: calls block until it is closed
	ignoreCtx bool
	calls     int
	costs     [][]int64
}

func (s *flakyStore) state() (bool, chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.failing, s.stall, s.ignoreCtx
}

func (s *flakyStore) wait(ctx context.Context) error {
	failing, stall, ignoreCtx := s.state()
	if stall != nil {
		if ignoreCtx {
			<-stall
			return errFlaky
		}
		select {
		case <-stall:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failing {
		return errFlaky
	}
	return nil
}

func (s *flakyStore) Reserve(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	if err := s.wait(ctx); err != nil {
		return store.Reservation{}, err
	}
	costs := make([]int64, len(bs))
	for i := range bs {
		costs[i] = bs[i].Cost
	}
	s.mu.Lock()
	s.costs = append(s.costs, costs)
	s.mu.Unlock()
	return s.inner.Reserve(ctx, bs, maxWait)
}

func (s *flakyStore) Pause(ctx context.Context, bs []store.Bucket, d time.Duration) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.inner.Pause(ctx, bs, d)
}

func (s *flakyStore) Limit(ctx context.Context, b store.Bucket, c store.Cap) (store.Stretch, error) {
	if err := s.wait(ctx); err != nil {
		return store.Stretch{}, err
	}
	return s.inner.Limit(ctx, b, c)
}

func (s *flakyStore) Held(ctx context.Context, bs []store.Bucket) (time.Duration, error) {
	if err := s.wait(ctx); err != nil {
		return 0, err
	}
	return s.inner.Held(ctx, bs)
}

func (s *flakyStore) set(failing bool) {
	s.mu.Lock()
	s.failing = failing
	s.mu.Unlock()
}

func (s *flakyStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var fbEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fbBucket is a bucket of 100/s (interval 10 ms), burst 8.
func fbBucket(key string) store.Bucket {
	return store.Bucket{Key: key, Rule: key, Interval: 10 * time.Millisecond, Burst: 8, Cost: 1}
}

type fbHarness struct {
	clk     *fakeclock.Clock
	primary *flakyStore
	f       *Store
	changes chan Change
}

func newFBHarness(t *testing.T, os outageSettings, fleet func() int64) *fbHarness {
	t.Helper()
	h := &fbHarness{clk: fakeclock.New(fbEpoch), changes: make(chan Change, 16)}
	h.primary = &flakyStore{inner: localstore.New(h.clk)}
	os.onChange = func(c Change) { h.changes <- c }
	h.f = newOutageStore(h.primary, os, h.clk, outageWiring{fleet: fleet})
	return h
}

func (h *fbHarness) reserve(t *testing.T, bs ...store.Bucket) store.Reservation {
	t.Helper()
	r, err := h.f.Reserve(context.Background(), bs, time.Hour)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return r
}

func (h *fbHarness) change(t *testing.T) Change {
	t.Helper()
	select {
	case c := <-h.changes:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("no mode change reported")
		return Change{}
	}
}

func TestFallbackSwitchesAtOnceAndProbes(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), nil)
	b := fbBucket("a")
	if r := h.reserve(t, b); !r.OK || h.f.Mode() != Shared {
		t.Fatalf("healthy: ok=%v mode=%v, want shared", r.OK, h.f.Mode())
	}

	h.primary.set(true)
	// The request that meets the failure is served locally at once.
	if r := h.reserve(t, b); !r.OK || r.Wait != 0 {
		t.Fatalf("first failing request: %+v, want ok at once from the local bucket", r)
	}
	c := h.change(t)
	if c.From != Shared || c.To != Fallback || !errors.Is(c.Err, errFlaky) || !c.At.Equal(fbEpoch) {
		t.Fatalf("change = %+v, want shared → fallback at %v caused by errFlaky", c, fbEpoch)
	}
	calls := h.primary.callCount()
	h.reserve(t, b)
	h.clk.Advance(probeEvery - time.Millisecond)
	h.reserve(t, b)
	if got := h.primary.callCount(); got != calls {
		t.Fatalf("open breaker called Redis %d times before the probe interval", got-calls)
	}

	h.clk.Advance(time.Millisecond)
	h.reserve(t, b) // the probe, failing
	if got := h.primary.callCount(); got != calls+1 {
		t.Fatalf("calls after probe interval = %d, want 1 probe", got-calls)
	}
	h.reserve(t, b) // no second probe within the interval
	if got := h.primary.callCount(); got != calls+1 {
		t.Fatalf("a failed probe was followed by another within the interval")
	}

	h.primary.set(false)
	h.clk.Advance(probeEvery)
	h.reserve(t, b)
	if h.f.Mode() != Shared {
		t.Fatalf("mode after a successful probe = %v, want shared", h.f.Mode())
	}
	if c := h.change(t); c.From != Fallback || c.To != Shared || c.Err != nil {
		t.Fatalf("change = %+v, want fallback → shared", c)
	}
}

func TestFallbackOutageModes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  Mode
		check func(t *testing.T, r store.Reservation, err error)
	}{
		{"fallback", Fallback, func(t *testing.T, r store.Reservation, err error) {
			if err != nil || !r.OK {
				t.Fatalf("got %+v, %v; want a local booking", r, err)
			}
		}},
		{"fail open", FailOpen, func(t *testing.T, r store.Reservation, err error) {
			if err != nil || !r.OK || r.Wait != 0 {
				t.Fatalf("got %+v, %v; want ok at once", r, err)
			}
		}},
		{"fail closed", FailClosed, func(t *testing.T, r store.Reservation, err error) {
			if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, errFlaky) {
				t.Fatalf("got %v, want store.ErrUnavailable wrapping the cause", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os := defaultOutageSettings()
			os.mode = tc.mode
			h := newFBHarness(t, os, nil)
			h.primary.set(true)
			b := fbBucket("a")
			// The failing call and the calls with the breaker open behave
			// alike; fail open never runs out of a burst.
			for range 20 {
				r, err := h.f.Reserve(context.Background(), []store.Bucket{b}, 0)
				if tc.mode == Fallback && err == nil && !r.OK {
					break // the local burst is spent; not a failure
				}
				tc.check(t, r, err)
			}
			if got := h.f.Mode(); got != tc.mode {
				t.Fatalf("mode = %v, want %v", got, tc.mode)
			}
			if c := h.change(t); c.To != tc.mode {
				t.Fatalf("change = %+v, want to %v", c, tc.mode)
			}
		})
	}
}

func TestFallbackShare(t *testing.T) {
	for _, tc := range []struct {
		name      string
		share     float64
		fleet     int64 // the heartbeat's count; 0: none seen
		wantBurst int   // of a rule with burst 8
		wantGap   time.Duration
	}{
		{"no heartbeat yet: assumed fleet", 0, 0, 1, 10 * time.Millisecond * store.DefaultFleetSize},
		{"counted fleet of 4", 0, 4, 2, 40 * time.Millisecond},
		{"counted fleet of 1", 0, 1, 8, 10 * time.Millisecond},
		{"explicit share wins", 0.5, 4, 4, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os := defaultOutageSettings()
			os.share = tc.share
			h := newFBHarness(t, os, func() int64 { return tc.fleet })
			h.primary.set(true)
			b := fbBucket("a")
			for i := range tc.wantBurst {
				if r := h.reserve(t, b); r.Wait != 0 {
					t.Fatalf("request %d of the local burst waits %v", i, r.Wait)
				}
			}
			r := h.reserve(t, b)
			if d := r.Wait - tc.wantGap; d < -time.Microsecond || d > time.Microsecond {
				t.Fatalf("first request past the burst waits %v, want %v", r.Wait, tc.wantGap)
			}
		})
	}
}

// TestFallbackSwitchAfterSharedQueue: the requests this replica booked in
// the shared bucket before Redis failed still depart, so its local bucket
// starts empty at the last of them and spends its share after them; a
// switch that comes after they have all gone starts with the local burst.
func TestFallbackSwitchAfterSharedQueue(t *testing.T) {
	const share = 40 * time.Millisecond // a fleet of 4: 25/s, burst 2
	for _, tc := range []struct {
		name    string
		booked  int           // requests booked in the shared bucket first
		advance time.Duration // then the clock moves, then Redis fails
	}{
		{"a queue still departing", 20, 50 * time.Millisecond},
		{"a queue gone", 20, time.Second},
		{"nothing booked", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
			b := fbBucket("a")
			var last time.Duration
			for range tc.booked {
				last = h.reserve(t, b).Wait
			}
			h.clk.Advance(tc.advance)
			h.primary.set(true)
			queue := max(last-tc.advance, 0)
			want := []time.Duration{0, 0, share} // the local burst, then the share's pace
			if queue > 0 {
				want = []time.Duration{queue + share, queue + 2*share, queue + 3*share}
			}
			for i, w := range want {
				r := h.reserve(t, b)
				if h.f.Mode() != Fallback {
					t.Fatalf("mode %v, want fallback", h.f.Mode())
				}
				if d := r.Wait - w; d < -time.Microsecond || d > time.Microsecond {
					t.Fatalf("local request %d waits %v, want %v (the shared queue ends in %v)", i, r.Wait, w, queue)
				}
			}
		})
	}
}

func TestFallbackBooksLocalSpendingOnReturn(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
	b := fbBucket("a")
	h.primary.set(true)
	h.reserve(t, b)
	h.reserve(t, b) // 2 of the local burst of 4 spent
	h.primary.set(false)
	h.clk.Advance(probeEvery)
	if r := h.reserve(t, b); !r.OK || h.f.Mode() != Shared {
		t.Fatalf("probe: %+v, mode %v", r, h.f.Mode())
	}
	h.reserve(t, b)
	h.primary.mu.Lock()
	costs := h.primary.costs
	h.primary.mu.Unlock()
	// The local bucket refilled for 250 ms at 50/s: 12.5 tokens, more than
	// the 2 spent, so nothing is owed... unless the spending is recent.
	if len(costs) != 2 || costs[1][0] != 1 {
		t.Fatalf("costs booked in Redis = %v", costs)
	}

	// Spend the whole local burst and return at once: the debt is booked
	// with the first shared request, once.
	h2 := newFBHarness(t, defaultOutageSettings(), func() int64 { return 2 })
	h2.primary.set(true)
	for range 4 {
		h2.reserve(t, b)
	}
	h2.primary.set(false)
	h2.f.brk.mu.Lock()
	h2.f.brk.nextProbe = h2.clk.Now()
	h2.f.brk.mu.Unlock()
	h2.reserve(t, b)
	h2.reserve(t, b)
	h2.primary.mu.Lock()
	costs = h2.primary.costs
	h2.primary.mu.Unlock()
	if len(costs) != 2 || costs[0][0] != 1+4 || costs[1][0] != 1 {
		t.Fatalf("costs booked in Redis = %v, want [[5] [1]]: the local burst of 4 once", costs)
	}
	// The local limiter stays for the grace period after the return; the
	// first request after it ends the grace period, the next books what
	// the limiter still owes and drops it.
	if n, _ := h2.f.local.len(); n != 1 {
		t.Fatalf("%d local limiters during the grace period, want 1", n)
	}
	h2.clk.Advance(returnGrace)
	h2.reserve(t, b)
	h2.reserve(t, b)
	if n, _ := h2.f.local.len(); n != 0 {
		t.Fatalf("%d local limiters left after the grace period", n)
	}
}

// TestFallbackGraceEndOwesWaitingOnly: when the grace period ends, a
// limiter owes Redis only the requests still waiting for their local slot
// (their shared slots were booked early), not its local burst: every
// request of the grace period was booked in Redis first.
func TestFallbackGraceEndOwesWaitingOnly(t *testing.T) {
	// A fleet of 4 on a 100/s, burst 8 rule: locally 25/s, burst 2.
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
	b := fbBucket("a")
	h.primary.set(true)
	h.reserve(t, b)
	h.returnNow()
	h.reserve(t, b) // the probe books the outage's debt
	// Late in the grace period, the limiter full again: five requests at
	// once, two on the local burst and three waiting 40, 80 and 120 ms.
	h.clk.Advance(returnGrace - 10*time.Millisecond)
	for range 5 {
		h.reserve(t, b)
	}
	h.clk.Advance(10 * time.Millisecond)
	h.reserve(t, b) // ends the grace period
	h.primary.mu.Lock()
	before := len(h.primary.costs)
	h.primary.mu.Unlock()
	h.reserve(t, b) // books what the limiter owes
	h.primary.mu.Lock()
	costs := h.primary.costs[before:]
	h.primary.mu.Unlock()
	// At +10 ms the limiter holds 2 - 5 + 0.25 tokens: 2.75 units still
	// wait, so 3 are owed; its burst of 2 is in Redis already.
	if len(costs) != 1 || costs[0][0] != 1+3 {
		t.Fatalf("costs booked in Redis after the grace period = %v, want [[4]]: the request and the 3 units still waiting", costs)
	}
	if n, _ := h.f.local.len(); n != 0 {
		t.Fatalf("%d local limiters left after the grace period", n)
	}

	// A limiter its grace period left owing, spent in an outage that
	// begins before it is settled, owes its whole spending on the next
	// return again.
	h2 := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
	h2.primary.set(true)
	h2.reserve(t, b)
	h2.returnNow()
	h2.reserve(t, b)
	h2.clk.Advance(returnGrace - 10*time.Millisecond)
	for range 5 {
		h2.reserve(t, b)
	}
	h2.clk.Advance(10 * time.Millisecond)
	h2.reserve(t, b) // ends the grace period: 2.75 units wait
	h2.primary.set(true)
	h2.reserve(t, b) // the outage: booked locally, 3.75 units wait
	h2.returnNow()
	h2.primary.mu.Lock()
	before = len(h2.primary.costs)
	h2.primary.mu.Unlock()
	h2.reserve(t, b)
	h2.primary.mu.Lock()
	costs = h2.primary.costs[before:]
	h2.primary.mu.Unlock()
	// Owed: the burst of 2 and the 3.75 units waiting, rounded up.
	if len(costs) != 1 || costs[0][0] != 1+6 {
		t.Fatalf("costs booked on the next return = %v, want [[7]]: the request and the outage's whole spending", costs)
	}
}

// returnNow makes h's next request the probe that finds its store healthy.
func (h *fbHarness) returnNow() {
	h.primary.set(false)
	h.f.brk.mu.Lock()
	h.f.brk.nextProbe = h.clk.Now()
	h.f.brk.mu.Unlock()
}

// departures runs one replica's closed loop of requests for d, each
// departing at its slot, and returns how many departed.
func (h *fbHarness) departures(t *testing.T, b store.Bucket, d time.Duration) int {
	t.Helper()
	end := h.clk.Now().Add(d)
	n := 0
	for {
		r := h.reserve(t, b)
		if !r.OK {
			t.Fatalf("refused: %+v", r)
		}
		h.clk.Advance(r.Wait)
		if !h.clk.Now().Before(end) {
			return n
		}
		n++
	}
}

func TestFallbackGraceAfterReturn(t *testing.T) {
	t.Run("a replica back first spends only its share until the grace ends", func(t *testing.T) {
		// A fleet of 4 on a 100/s, burst 8 rule: locally 25/s, burst 2.
		h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
		b := fbBucket("a")
		h.primary.set(true)
		h.departures(t, b, time.Second) // the outage: the local limiter runs empty
		h.returnNow()
		// Without the grace, this replica alone would take the shared
		// 100/s while the other three still spend 25/s each locally.
		n := h.departures(t, b, returnGrace)
		if h.f.Mode() != Shared {
			t.Fatalf("mode %v, want shared", h.f.Mode())
		}
		if limit := 25*int(returnGrace/time.Second) + 2; n > limit {
			t.Fatalf("%d departures in the %v grace period, want ≤ %d (25/s and the local burst 2)", n, returnGrace, limit)
		}
		if n < 25*int(returnGrace/time.Second)-2 {
			t.Fatalf("%d departures in the %v grace period, want about 50 (its share)", n, returnGrace)
		}
		// After it, the shared bucket alone: 100/s.
		if n := h.departures(t, b, time.Second); n < 95 {
			t.Fatalf("%d departures in the second after the grace period, want about 100 (the shared rate)", n)
		}
		if n, _ := h.f.local.len(); n != 0 {
			t.Fatalf("%d local limiters after the grace period, want 0", n)
		}
	})
	t.Run("an untrusted count after the return keeps the outage's share", func(t *testing.T) {
		// After a restart, or an outage longer than the heartbeat's TTL,
		// the replicas beat again one by one and the count is untrusted
		// (0) until a second beat: the grace period keeps the quarter of
		// the outage, not the assumed fleet's tenth.
		var live atomic.Int64
		live.Store(4)
		h := newFBHarness(t, defaultOutageSettings(), live.Load)
		b := fbBucket("a")
		h.primary.set(true)
		h.departures(t, b, time.Second)
		h.returnNow()
		live.Store(0)
		n := h.departures(t, b, returnGrace)
		if want := 25 * int(returnGrace/time.Second); n < want-2 || n > want+2 {
			t.Fatalf("%d departures in the %v grace period, want about %d (the outage's share, 25/s)", n, returnGrace, want)
		}
		// A trusted count that gives a smaller share holds: the fleet grew.
		h2 := newFBHarness(t, defaultOutageSettings(), live.Load)
		live.Store(4)
		h2.primary.set(true)
		h2.departures(t, b, time.Second)
		h2.returnNow()
		live.Store(5)
		if n := h2.departures(t, b, returnGrace); n > 20*int(returnGrace/time.Second)+2 {
			t.Fatalf("%d departures in the %v grace period with a fleet of 5, want ≤ %d (20/s)", n, returnGrace, 20*int(returnGrace/time.Second)+2)
		}
	})
	t.Run("the local slot's wait sets the departure and goes back with a refund", func(t *testing.T) {
		h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
		a, b := fbBucket("a"), fbBucket("b")
		h.primary.set(true)
		h.reserve(t, a, b)
		h.reserve(t, a, b) // b's local burst (2) spent
		h.returnNow()
		h.reserve(t, a, b) // the probe: debt booked, local slot at 40 ms
		r := h.reserve(t, a, b)
		if r.Wait != 80*time.Millisecond {
			t.Fatalf("wait %v, want 80ms (the second local slot past the burst at 25/s)", r.Wait)
		}
		if err := r.Cancel(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := h.reserve(t, a, b); r.Wait != 80*time.Millisecond {
			t.Fatalf("after a refund, wait %v, want the refunded 80ms local slot", r.Wait)
		}
	})
	t.Run("a copy of the reservation gives both slots back, once", func(t *testing.T) {
		h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
		a, b := fbBucket("a"), fbBucket("b")
		h.primary.set(true)
		h.reserve(t, a, b)
		h.reserve(t, a, b)
		h.returnNow()
		h.reserve(t, a, b)
		r := h.reserve(t, a, b)
		c := r
		if err := c.Cancel(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The next request takes the same local and shared slots: a second
		// cancel of r, from either copy, must not give them away.
		if r2 := h.reserve(t, a, b); r2.Wait != 80*time.Millisecond {
			t.Fatalf("after the copy's cancel, wait %v, want the 80ms local slot back", r2.Wait)
		}
		for _, x := range []*store.Reservation{&r, &c} {
			if err := x.Cancel(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if r3 := h.reserve(t, a, b); r3.Wait != 120*time.Millisecond {
			t.Fatalf("after second cancels, wait %v, want 120ms (nothing given back again)", r3.Wait)
		}
	})
	t.Run("a local wait beyond what the request accepts yields to the shared slot", func(t *testing.T) {
		h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
		b := fbBucket("a")
		h.primary.set(true)
		h.reserve(t, b)
		h.reserve(t, b)
		h.returnNow()
		r, err := h.f.Reserve(context.Background(), []store.Bucket{b}, 10*time.Millisecond)
		if err != nil || !r.OK {
			t.Fatalf("reserve: %+v, %v; want the shared slot", r, err)
		}
		if r.Wait >= 40*time.Millisecond {
			t.Fatalf("wait %v, want the shared slot's, under the local 40ms", r.Wait)
		}
	})
	t.Run("fail-open mode has no grace period", func(t *testing.T) {
		os := defaultOutageSettings()
		os.mode = FailOpen
		h := newFBHarness(t, os, func() int64 { return 4 })
		b := fbBucket("a")
		h.primary.set(true)
		h.reserve(t, b)
		h.returnNow()
		h.reserve(t, b)
		if h.f.graceUntil.Load() != 0 {
			t.Fatal("grace period after a return from fail-open")
		}
	})
}

func TestFallbackLocalRefundAndPause(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 1 })
	h.primary.set(true)
	b := fbBucket("a")
	for range 8 {
		h.reserve(t, b)
	}
	r := h.reserve(t, b)
	if r.Wait != 10*time.Millisecond {
		t.Fatalf("wait = %v, want 10ms", r.Wait)
	}
	if err := r.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r2 := h.reserve(t, b); r2.Wait != 10*time.Millisecond {
		t.Fatalf("after refund, wait = %v, want the refunded 10ms slot", r2.Wait)
	}

	if err := h.f.Pause(context.Background(), []store.Bucket{b}, time.Second); err != nil {
		t.Fatal(err)
	}
	if r := h.reserve(t, b); r.Wait != time.Second {
		t.Fatalf("after a 1s pause, wait = %v, want 1s", r.Wait)
	}
	if r := h.reserve(t, b); r.Wait != time.Second+10*time.Millisecond {
		t.Fatalf("second after the pause waits %v, want 1.01s (refill from empty)", r.Wait)
	}
}

func TestFallbackAllOrNothingAndCost(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 4 })
	h.primary.set(true)
	a, b := fbBucket("a"), fbBucket("b")
	b.Interval, b.Burst = time.Second, 1 // share 1/4: burst 1, one token per 4s
	if _, err := h.f.Reserve(context.Background(), []store.Bucket{a, b}, 0); err != nil {
		t.Fatal(err)
	}
	r, _ := h.f.Reserve(context.Background(), []store.Bucket{a, b}, time.Second)
	if r.OK || r.Limiter != 1 {
		t.Fatalf("got %+v, want refused by bucket b", r)
	}
	// Refused: a's tokens went back, so a's local burst (2) has one left.
	if r := h.reserve(t, a); r.Wait != 0 {
		t.Fatalf("a after a refused request waits %v, want 0", r.Wait)
	}
	// A cost above the local burst (2) is booked in parts.
	big := fbBucket("c")
	big.Cost = 8
	if r := h.reserve(t, big); r.Wait != 240*time.Millisecond {
		t.Fatalf("cost 8 at 25/s with burst 2 waits %v, want 240ms", r.Wait)
	}
}

func TestFallbackSweepsIdleLimiters(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 1 })
	h.primary.set(true)
	for i := range 3 {
		h.reserve(t, fbBucket(string(rune('a'+i))))
	}
	h.clk.Advance(store.SweepEvery)
	h.reserve(t, fbBucket("z"))
	if n, _ := h.f.local.len(); n != 1 {
		t.Fatalf("%d limiters after a sweep, want 1 (the idle ones dropped)", n)
	}
}

func TestFallbackCallerCancelDoesNotTrip(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), nil)
	h.primary.mu.Lock()
	h.primary.stall = make(chan struct{})
	h.primary.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.f.Reserve(ctx, []store.Bucket{fbBucket("a")}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if h.f.Mode() != Shared {
		t.Fatalf("mode = %v after the caller gave up, want shared", h.f.Mode())
	}
}

func TestFallbackTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		guard     bool
		ignoreCtx bool
	}{
		{"client honours deadlines", false, false},
		{"guarded client ignoring deadlines", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(fbEpoch)
			primary := &flakyStore{inner: localstore.New(clk), ignoreCtx: tc.ignoreCtx}
			os := defaultOutageSettings()
			os.timeout = 20 * time.Millisecond
			f := newOutageStore(primary, os, clk, outageWiring{guard: tc.guard})
			if d := f.timeout.Next(); d != store.ColdTimeout {
				t.Fatalf("timeout before the first answer = %v, want %v", d, store.ColdTimeout)
			}
			if _, err := f.Reserve(context.Background(), []store.Bucket{fbBucket("warm")}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if d := f.timeout.Next(); d != os.timeout {
				t.Fatalf("timeout after the first answer = %v, want %v", d, os.timeout)
			}
			// A call of a script of its own stays cold until it has
			// answered once: its first run loads the script.
			if d := f.callTimeout("limit"); d != store.ColdTimeout {
				t.Fatalf("the first limit call's timeout = %v, want %v", d, store.ColdTimeout)
			}
			if _, err := f.Limit(context.Background(), fbBucket("warm"), store.Cap{Rate: 50, Span: time.Second}); err != nil {
				t.Fatal(err)
			}
			if d := f.callTimeout("limit"); d != os.timeout {
				t.Fatalf("the next limit call's timeout = %v, want %v", d, os.timeout)
			}
			if d := f.callTimeout("pause"); d != store.ColdTimeout {
				t.Fatalf("the first pause call's timeout = %v, want %v", d, store.ColdTimeout)
			}
			stall := make(chan struct{})
			t.Cleanup(func() { close(stall) })
			primary.mu.Lock()
			primary.stall = stall
			primary.mu.Unlock()
			start := time.Now()
			r, err := f.Reserve(context.Background(), []store.Bucket{fbBucket("a")}, time.Hour)
			took := time.Since(start)
			if err != nil || !r.OK {
				t.Fatalf("got %+v, %v; want a local booking", r, err)
			}
			// Generous: the machine is shared. The fault tests measure the
			// real bound against a stalled redis-server.
			if took > os.timeout+500*time.Millisecond {
				t.Fatalf("a stalled store held the request %v (timeout %v)", took, os.timeout)
			}
			if f.Mode() != Fallback {
				t.Fatalf("mode = %v, want fallback", f.Mode())
			}
			f.brk.mu.Lock()
			cause := f.brk.cause
			f.brk.mu.Unlock()
			if !errors.Is(cause, store.ErrTimeout) {
				t.Fatalf("cause = %v, want store.ErrTimeout", cause)
			}
		})
	}
}

func TestModeChangeCallbackRunsOutsideLocks(t *testing.T) {
	clk := fakeclock.New(fbEpoch)
	primary := &flakyStore{inner: localstore.New(clk), failing: true}
	got := make(chan Mode, 1)
	var f *Store
	os := defaultOutageSettings()
	os.onChange = func(c Change) {
		// Would deadlock if called under the breaker's lock.
		got <- f.Mode()
	}
	f = newOutageStore(primary, os, clk, outageWiring{})
	if _, err := f.Reserve(context.Background(), []store.Bucket{fbBucket("a")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != Fallback {
			t.Fatalf("mode read in the callback = %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("callback never ran (deadlock?)")
	}
}

// TestFallbackFailedProbeKeepsLocalQueue: a probe that fails must leave the
// local limiter as it was, waiting requests and all; a fresh one would hand
// out its burst again at every probe.
func TestFallbackFailedProbeKeepsLocalQueue(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 8 })
	h.primary.set(true)
	b := fbBucket("a") // share 1/8: burst 1, one slot per 80 ms
	var last time.Duration
	for range 4 {
		last = h.reserve(t, b).Wait
	}
	h.clk.Advance(probeEvery)
	if r := h.reserve(t, b); r.Wait != last+80*time.Millisecond-probeEvery {
		t.Fatalf("after a failed probe, wait = %v, want the queue continued: %v", r.Wait, last+80*time.Millisecond-probeEvery)
	}
}

// TestFallbackClockStepsBack: limiters are never used at an earlier time
// than before, so a clock stepping back hands out no tokens twice.
func TestFallbackClockStepsBack(t *testing.T) {
	h := newFBHarness(t, defaultOutageSettings(), func() int64 { return 8 })
	h.primary.set(true)
	b := fbBucket("a")
	h.reserve(t, b)
	h.clk.Advance(-time.Second)
	if r := h.reserve(t, b); r.Wait != time.Second+80*time.Millisecond {
		t.Fatalf("after the clock stepped back 1s, wait = %v, want 1.08s", r.Wait)
	}
}

// outageSettings are the outage options a test sets, as the root's
// options do (the root's outageSettings).
type outageSettings struct {
	timeout  time.Duration
	mode     Mode
	share    float64
	onChange func(Change)
}

func defaultOutageSettings() outageSettings {
	return outageSettings{timeout: DefaultTimeout, mode: Fallback}
}

// outageWiring is what the root's wiring tells the outage store of the
// store it wraps.
type outageWiring struct {
	fleet              func() int64
	guard, reserveKept bool
	timeout            *store.Timeout
}

// newOutageStore wraps primary as the root's wiring does, with the
// settings' defaults filled in.
func newOutageStore(primary store.Store, os outageSettings, c Clock, w outageWiring) *Store {
	if os.timeout <= 0 {
		os.timeout = DefaultTimeout
	}
	if w.timeout == nil {
		w.timeout = store.NewTimeout(os.timeout)
	}
	return New(primary, c, Options{Mode: os.mode, Share: os.share, OnChange: os.onChange,
		Timeout: w.timeout, Fleet: w.fleet, Guard: w.guard, ReserveKept: w.reserveKept})
}
