package throttle

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// t0 is an arbitrary Unix-nanosecond instant (late 2023) from which the GCRA
// tables count, so that offsets stay readable.
const t0 = int64(1_700_000_000_000_000_000)

// gcraStep is one request against a bucket: it arrives at now, costs cost,
// and must be allowed at wantAt (then it is booked at that time).
type gcraStep struct {
	now, cost, wantAt int64
}

func TestGCRA(t *testing.T) {
	const maxI = math.MaxInt64
	tests := []struct {
		name            string
		interval, burst int64
		steps           []gcraStep
	}{
		{
			name: "burst: B at once, the B+1th waits one interval", interval: 10, burst: 3,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10}},
		},
		{
			name: "steady state: one per interval once the burst is spent", interval: 10, burst: 2,
			steps: []gcraStep{
				{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10}, {t0 + 10, 1, t0 + 20},
				{t0 + 20, 1, t0 + 30}, {t0 + 30, 1, t0 + 40},
			},
		},
		{
			name: "steady arrivals at the rate never wait", interval: 10, burst: 1,
			steps: []gcraStep{{t0, 1, t0}, {t0 + 10, 1, t0 + 10}, {t0 + 20, 1, t0 + 20}, {t0 + 30, 1, t0 + 30}},
		},
		{
			name: "idle bucket refills to a full burst", interval: 10, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0 + 1000, 1, t0 + 1000}, {t0 + 1000, 1, t0 + 1000}, {t0 + 1000, 1, t0 + 1010}},
		},
		{
			name: "cost > 1 takes cost intervals", interval: 10, burst: 5,
			steps: []gcraStep{{t0, 3, t0}, {t0, 3, t0 + 10}, {t0, 1, t0 + 20}, {t0, 5, t0 + 70}},
		},
		{
			name: "cost equal to burst goes at once on an empty bucket", interval: 10, burst: 4,
			steps: []gcraStep{{t0, 4, t0}, {t0, 4, t0 + 40}},
		},
		{
			name: "clock going backwards is never looser and never negative", interval: 10, burst: 2,
			steps: []gcraStep{
				{t0, 1, t0}, {t0, 1, t0}, {t0, 1, t0 + 10},
				// The clock jumps back 1000: the next slot is still the one
				// after the last booking, not a fresh burst.
				{t0 - 1000, 1, t0 + 20}, {t0 - 1000, 1, t0 + 30},
			},
		},
		{
			name: "huge interval, burst 1: the second request waits (saturated, not wrapped)", interval: maxI, burst: 1,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, maxI}, {t0 + 5, 1, maxI}},
		},
		{
			name: "huge interval, burst 2: the third request waits", interval: maxI / 2, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, maxI - maxI/2}},
		},
		{
			name: "burst MaxInt with interval 1", interval: 1, burst: maxI,
			steps: []gcraStep{{t0, 1, t0}, {t0, maxI, t0 + 1}},
		},
		{
			name: "huge cost on a huge bucket", interval: 3, burst: maxI / 2,
			// The exact TAT, t0 + 3·MaxInt64/2, saturates; the next slot
			// still lies in the past, so the request goes at once.
			steps: []gcraStep{{t0, maxI / 2, t0}, {t0, 1, t0}},
		},
		{
			name: "TAT saturated after two bookings: the third request waits", interval: 1 << 62, burst: 2,
			steps: []gcraStep{{t0, 1, t0}, {t0, 1, t0}, {t0, 1, maxI - 1<<62}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tat int64
			for i, s := range tt.steps {
				at := gcraAllowAt(tat, s.now, tt.interval, tt.burst, s.cost)
				if at != s.wantAt {
					t.Fatalf("step %d %+v: allowed at %d (now%+d), want %d (now%+d)", i, s, at, at-s.now, s.wantAt, s.wantAt-s.now)
				}
				if at < s.now {
					t.Fatalf("step %d: negative wait %d", i, at-s.now)
				}
				next := gcraBook(tat, at, tt.interval, s.cost)
				if next < tat {
					t.Fatalf("step %d: booking moved TAT back from %d to %d", i, tat, next)
				}
				tat = next
			}
		})
	}
}

// TestGCRAOracle checks the saturating arithmetic against exact big-integer
// arithmetic over random huge values: the answer must be the exact one
// whenever the exact one fits in an int64, and never wrap.
func TestGCRAOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64N(1000) + 1
		case 1:
			return math.MaxInt64 - rng.Int64N(1000)
		case 2:
			return int64(1) << rng.IntN(63)
		default:
			return rng.Int64N(math.MaxInt64) + 1
		}
	}
	maxBig := big.NewInt(math.MaxInt64)
	clamp := func(x *big.Int) int64 {
		if x.Cmp(maxBig) > 0 {
			return math.MaxInt64
		}
		return x.Int64()
	}
	for i := range 100_000 {
		iv, burst := pick(), pick()
		cost := rng.Int64N(burst) + 1
		now := rng.Int64N(2 * t0)
		tat := []int64{0, now, now + rng.Int64N(1<<40), pick()}[rng.IntN(4)]

		// exact: max(now, max(tat, now) - (burst-cost)·iv)
		base := big.NewInt(max(tat, now))
		slack := new(big.Int).Mul(big.NewInt(burst-cost), big.NewInt(iv))
		exact := new(big.Int).Sub(base, slack)
		if exact.Cmp(big.NewInt(now)) < 0 {
			exact.SetInt64(now)
		}
		if got, want := gcraAllowAt(tat, now, iv, burst, cost), exact.Int64(); got != want {
			t.Fatalf("case %d: gcraAllowAt(tat=%d, now=%d, iv=%d, burst=%d, cost=%d) = %d, want %d",
				i, tat, now, iv, burst, cost, got, want)
		}
		at := exact.Int64()
		book := new(big.Int).Add(big.NewInt(max(tat, at)), new(big.Int).Mul(big.NewInt(cost), big.NewInt(iv)))
		if got, want := gcraBook(tat, at, iv, cost), clamp(book); got != want {
			t.Fatalf("case %d: gcraBook(tat=%d, at=%d, iv=%d, cost=%d) = %d, want %d", i, tat, at, iv, cost, got, want)
		}
	}
}

func TestGCRAPause(t *testing.T) {
	tests := []struct {
		name            string
		tat, until      int64
		interval, burst int64
		want            int64
	}{
		{name: "empty bucket shut until then refilling", tat: 0, until: t0 + 100, interval: 10, burst: 3, want: t0 + 120},
		{name: "a later TAT is kept", tat: t0 + 500, until: t0 + 100, interval: 10, burst: 3, want: t0 + 500},
		{name: "saturates", tat: 0, until: t0, interval: math.MaxInt64, burst: 2, want: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gcraPause(tt.tat, tt.until, tt.interval, tt.burst)
			if got != tt.want {
				t.Fatalf("gcraPause = %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("after a pause the next request departs at until, then one per interval", func(t *testing.T) {
		const iv, burst = 10, 3
		tat := gcraPause(0, t0+100, iv, burst)
		for i, want := range []int64{t0 + 100, t0 + 110, t0 + 120} {
			at := gcraAllowAt(tat, t0, iv, burst, 1)
			if at != want {
				t.Fatalf("request %d allowed at now%+d, want now%+d", i, at-t0, want-t0)
			}
			tat = gcraBook(tat, at, iv, 1)
		}
	})
}

// TestLocalStoreOneBucket runs sequences of requests through one bucket of
// the local store: bursts, waits, rejections that book nothing, costs, a
// clock going backwards and saturated arithmetic.
func TestLocalStoreOneBucket(t *testing.T) {
	now := time.Unix(0, t0)
	ms := time.Millisecond
	type call struct {
		at      time.Duration // offset from now
		n       int
		maxWait time.Duration
		want    time.Duration
		ok      bool
	}
	tests := []struct {
		name  string
		limit Limit
		calls []call
	}{
		{
			name:  "burst then one per interval",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 3},
			calls: []call{
				{0, 1, 0, 0, true}, {0, 1, 0, 0, true}, {0, 1, 0, 0, true},
				{0, 1, time.Second, 100 * ms, true}, {0, 1, time.Second, 200 * ms, true},
				{250 * ms, 1, time.Second, 50 * ms, true},
			},
		},
		{
			name:  "maxWait rejection books nothing",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
			calls: []call{
				{0, 1, 0, 0, true},
				{0, 1, 99 * ms, 100 * ms, false}, {0, 1, 0, 100 * ms, false},
				{0, 1, 100 * ms, 100 * ms, true}, // the same slot: nothing was booked
				{0, 1, 0, 200 * ms, false},
			},
		},
		{
			name:  "cost > 1",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 5},
			calls: []call{{0, 5, 0, 0, true}, {0, 2, time.Second, 200 * ms, true}, {0, 1, time.Second, 300 * ms, true}},
		},
		{
			name:  "clock going backwards waits longer, never less",
			limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
			calls: []call{{0, 1, 0, 0, true}, {-time.Hour, 1, 2 * time.Hour, time.Hour + 100*ms, true}},
		},
		{
			name:  "huge period: the second request never fits",
			limit: Limit{Rate: 1, Period: math.MaxInt64, Burst: 1},
			calls: []call{{0, 1, 0, 0, true}, {0, 1, math.MaxInt64, time.Duration(math.MaxInt64 - t0), true}},
		},
		{
			name:  "huge burst and cost",
			limit: Limit{Rate: math.MaxInt, Period: math.MaxInt64, Burst: math.MaxInt / 2},
			calls: []call{{0, math.MaxInt / 2, 0, 0, true}, {0, 1, 0, time.Nanosecond, false}, {time.Nanosecond, 1, 0, 0, true}},
		},
		{
			name:  "burst MaxInt, cost MaxInt goes at once",
			limit: Limit{Rate: math.MaxInt, Period: math.MaxInt64, Burst: math.MaxInt},
			calls: []call{{0, math.MaxInt, 0, 0, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := compileRules([]Rule{{Name: "bucket", Limit: tt.limit}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			clk := fakeclock.New(now)
			s := newLocalStore(clk)
			for i, c := range tt.calls {
				clk.Set(now.Add(c.at))
				b := store.Bucket{Key: "bucket", Rule: "bucket", Interval: rules[0].interval, Burst: rules[0].burst, Cost: int64(c.n)}
				r, err := s.Reserve(context.Background(), []store.Bucket{b}, c.maxWait)
				if err != nil {
					t.Fatal(err)
				}
				wait, ok := r.Wait, r.OK
				if wait != c.want || ok != c.ok {
					t.Fatalf("call %d %+v: Reserve = %v, %v; want %v, %v", i, c, wait, ok, c.want, c.ok)
				}
				if wait < 0 {
					t.Fatalf("call %d: negative wait %v", i, wait)
				}
			}
		})
	}
}

// epoch is where fake clocks start in the store and transport tests.
var epoch = time.Unix(0, t0)

func newTestStore() (*localStore, *fakeclock.Clock) {
	c := fakeclock.New(epoch)
	return newLocalStore(c), c
}

func (s *localStore) tat(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tats[key]
}

func (s *localStore) snapshot() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int64, len(s.tats))
	for k, v := range s.tats {
		m[k] = v
	}
	return m
}

func mustReserve(t *testing.T, s *localStore, bs []store.Bucket, maxWait time.Duration) store.Reservation {
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
		if got, want := s.tat("fast"), t0+10; got != want {
			t.Fatalf("fast TAT now%+d, want it untouched at now%+d", got-t0, want-t0)
		}
		// Refunding the reservation leaves the deferred bucket alone.
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := s.tat("fast"), t0+10; got != want {
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
		if got, want := s.tat("fast"), t0+10+10; got != want {
			t.Fatalf("fast TAT now%+d, want now%+d", got-t0, want-t0)
		}
		if got, want := s.tat("slow"), t0+30+30; got != want {
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
		before := s.snapshot()
		r := mustReserve(t, s, bs, 20)
		if r.OK || r.Wait != 30 || r.Limiter != 1 {
			t.Fatalf("got %+v; want rejection needing 30ns from limiter 1", r)
		}
		if after := s.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("store changed by a rejected reservation: %v → %v", before, after)
		}
		if _, ok := s.snapshot()["fast"]; ok {
			t.Fatal("the fast bucket was created by a rejected reservation")
		}
	})

	t.Run("refund of the last booking restores every bucket", func(t *testing.T) {
		s, _ := newTestStore()
		mustReserve(t, s, bs, 0)
		before := s.snapshot()
		r := mustReserve(t, s, bs, time.Hour)
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if after := s.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refund left %v, want %v", after, before)
		}
		if r2 := mustReserve(t, s, bs, time.Hour); r2.Wait != r.Wait {
			t.Fatalf("next request waits %v, want the refunded slot's %v", r2.Wait, r.Wait)
		}
	})

	t.Run("refund of a booking with later ones behind it changes nothing", func(t *testing.T) {
		s, _ := newTestStore()
		r1 := mustReserve(t, s, bs, time.Hour)
		afterR1 := s.snapshot()
		r2 := mustReserve(t, s, bs, time.Hour)
		afterR2 := s.snapshot()
		if err := r1.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.snapshot(); fmt.Sprint(got) != fmt.Sprint(afterR2) {
			t.Fatalf("refund of a non-last booking changed the store: %v → %v", afterR2, got)
		}
		if err := r2.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.snapshot(); fmt.Sprint(got) != fmt.Sprint(afterR1) {
			t.Fatalf("refund of the last booking left %v, want %v", got, afterR1)
		}
	})

	t.Run("refund only where the booking is still last", func(t *testing.T) {
		s, _ := newTestStore()
		r := mustReserve(t, s, bs, time.Hour)
		// Another request books the slow bucket only.
		mustReserve(t, s, []store.Bucket{slow}, time.Hour)
		slowBefore := s.tat("slow")
		if err := r.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		if s.tat("fast") != r.Undo.(*localBooking).prev[0] {
			t.Fatalf("fast bucket not refunded")
		}
		if s.tat("slow") != slowBefore {
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
		before := s.tat("k")
		if err := s.Pause(ctx, []store.Bucket{b}, 5); err != nil {
			t.Fatal(err)
		}
		if s.tat("k") != before {
			t.Fatalf("TAT moved from %d to %d", before, s.tat("k"))
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
		if n := s.len(); n != store.SweepMinSize {
			t.Fatalf("len %d before the map reaches the sweep size, want %d", n, store.SweepMinSize)
		}
		mustReserve(t, s, []store.Bucket{key(-2)}, 0) // reaches sweepMinSize: sweeps
		if n := s.len(); n != 2 {
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
		if n := s.len(); n != 1 {
			t.Fatalf("len %d, want 1", n)
		}
	})

	t.Run("live buckets survive a sweep with their TAT", func(t *testing.T) {
		s, c := newTestStore()
		long := store.Bucket{Key: "long", Rule: "r", Interval: 2 * store.SweepEvery, Burst: 1, Cost: 1}
		mustReserve(t, s, []store.Bucket{long}, 0)
		tat := s.tat("long")
		c.Advance(store.SweepEvery)
		mustReserve(t, s, []store.Bucket{key(1)}, 0)
		if s.len() != 2 || s.tat("long") != tat {
			t.Fatalf("live bucket lost by the sweep (len %d, tat %d want %d)", s.len(), s.tat("long"), tat)
		}
		if r := mustReserve(t, s, []store.Bucket{long}, time.Hour); r.Wait != store.SweepEvery {
			t.Fatalf("wait %v after the sweep, want %v", r.Wait, store.SweepEvery)
		}
	})
}
