package algorithm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/store"
)

// The property tests drive one algorithm at a time through the local store
// (whose decisions the conformance tests hold Redis to) with seeded random
// traces, and check every booking against a small reference model of the
// algorithm, built from the departures booked so far (cancelled ones
// taken out): the quota in the algorithm's own sense is never exceeded,
// the departure is the earliest the model allows, waits are never
// negative and no request that may wait long enough is refused.
//
// The sliding log keeps only its newest quota of entries and gives a
// refund on a full log back at its oldest entry (algorithm.LogRefund):
// its model decides on that documented log (logModel), while the quota is
// checked on the departures really booked.

// departure is one booked request: its departure (µs) and cost.
type departure struct{ at, cost int64 }

// model is the reference of one algorithm: fits reports whether a request
// of cost c may depart at t given the departures booked before it.
type model struct {
	name string
	b    store.Bucket
	// fits is the definition of the algorithm; floor is the latest
	// departure booked (the order the queueing algorithms keep).
	fits func(ds []departure, t, c int64) bool
	// quota checks the record after booking d, the last of ds.
	quota func(t *testing.T, ds []departure, d departure)
	// fifo: a request departs no earlier than the latest departure
	// booked; keep: even one booked and cancelled since (the sliding
	// counter keeps its order past a refund).
	fifo, keep bool
	// monotone: once a request fits it fits later too, so t-1 not fitting
	// proves t is the earliest; otherwise every window before t is probed
	// too.
	monotone bool
}

const (
	propPeriod = int64(1_000_000) // µs
	propAnchor = int64(250_000)
)

func sumIn(ds []departure, lo, hi int64) int64 { // departures in (lo, hi]
	var n int64
	for _, d := range ds {
		if d.at > lo && d.at <= hi {
			n += d.cost
		}
	}
	return n
}

func fixedStart(t int64) int64 {
	return algorithm.Window{Period: propPeriod, Anchor: propAnchor}.Start(t)
}

func counterEstimate(ds []departure, t int64) int64 { // scaled by the period
	s := t - (t % propPeriod)
	prev := sumIn(ds, s-propPeriod-1, s-1)
	cur := sumIn(ds, s-1, t)
	return prev*(propPeriod-(t-s)) + cur*propPeriod
}

func models() []model {
	const q = 5
	return []model{
		{
			name: "FixedWindow",
			b:    store.Bucket{Key: "fw", Rule: "fw", Algorithm: store.FixedWindow, Burst: q, Period: time.Second, Anchor: time.Duration(propAnchor) * time.Microsecond, Interval: 200 * time.Millisecond},
			fits: func(ds []departure, t, c int64) bool {
				s := fixedStart(t)
				return sumIn(ds, s-1, s+propPeriod-1)+c <= q
			},
			quota: func(t *testing.T, ds []departure, d departure) {
				s := fixedStart(d.at)
				if n := sumIn(ds, s-1, s+propPeriod-1); n > q {
					t.Fatalf("window at %d holds %d > %d", s, n, q)
				}
			},
		},
		{
			name: "SlidingLog",
			b:    store.Bucket{Key: "sl", Rule: "sl", Algorithm: store.SlidingLog, Burst: q, Period: time.Second, Interval: 200 * time.Millisecond},
			fits: func(ds []departure, t, c int64) bool {
				return sumIn(ds, t-propPeriod, t)+c <= q
			},
			quota: func(t *testing.T, ds []departure, d departure) {
				// In order, the period ending at d is the only one d fills.
				if n := sumIn(ds, d.at-propPeriod, d.at); n > q {
					t.Fatalf("%d units in the period ending at %d > %d", n, d.at, q)
				}
			},
			fifo: true, monotone: true,
		},
		{
			name: "SlidingCounter",
			b:    store.Bucket{Key: "sc", Rule: "sc", Algorithm: store.SlidingCounter, Burst: q, Period: time.Second, Interval: 200 * time.Millisecond},
			fits: func(ds []departure, t, c int64) bool {
				return counterEstimate(ds, t)+c*propPeriod <= q*propPeriod
			},
			quota: func(t *testing.T, ds []departure, d departure) {
				if est := counterEstimate(ds, d.at); est > q*propPeriod {
					t.Fatalf("estimate %.3f at %d > %d", float64(est)/float64(propPeriod), d.at, q)
				}
			},
			fifo: true, keep: true,
		},
		{
			name: "TokenBucket",
			b:    store.Bucket{Key: "tb", Rule: "tb", Algorithm: store.TokenBucket, Burst: 3, Interval: 200 * time.Millisecond, Lateness: time.Hour},
			fits: nil, // GCRA: its own tests in internal/localstore; the bound below is the model
			quota: func(t *testing.T, ds []departure, d departure) {
				// ≤ Burst + (b-a)/interval units in any [a, b]: check
				// the intervals that start or end at d.
				for _, e := range ds {
					a, b := min(e.at, d.at), max(e.at, d.at)
					if n, bound := sumIn(ds, a-1, b), 3+(b-a)/200_000; n > bound {
						t.Fatalf("%d units in [%d, %d], bound %d", n, a, b, bound)
					}
				}
			},
		},
	}
}

func TestProperties(t *testing.T) {
	t.Parallel()
	for _, m := range models() {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/seed=%d", m.name, seed), func(t *testing.T) {
				t.Parallel()
				runProperty(t, m, seed)
			})
		}
	}
}

// fixedStartOf returns the start of the window of m's windows holding t.
func fixedStartOf(m model, t int64) int64 {
	if m.b.Algorithm == store.FixedWindow {
		return fixedStart(t)
	}
	return t - t%propPeriod
}

// logModel is the sliding log as documented, unit by unit: the newest
// quota units of the last period; a cancel on a full log moves the
// cancelled units to the oldest one's time instead of removing them (and
// so leaves them when that is their own time).
type logModel struct {
	q     int64
	units []int64 // in order
}

// trim drops the units at or before now-period and keeps the newest q.
func (l *logModel) trim(now int64) {
	for len(l.units) > 0 && l.units[0] <= now-propPeriod {
		l.units = l.units[1:]
	}
	if n := int64(len(l.units)); n > l.q {
		l.units = l.units[n-l.q:]
	}
}

func (l *logModel) book(now int64, d departure) {
	l.trim(now)
	for range d.cost {
		l.units = append(l.units, d.at)
	}
	l.trim(now)
}

func (l *logModel) cancel(now int64, d departure) {
	l.trim(now)
	full := int64(len(l.units)) == l.q
	if full && l.units[0] == d.at {
		return // moved to the oldest, the units would stay where they are
	}
	var kept []int64
	var r int64
	for i := len(l.units) - 1; i >= 0; i-- { // the newest units at d.at go
		if l.units[i] == d.at && r < d.cost {
			r++
			continue
		}
		kept = append([]int64{l.units[i]}, kept...)
	}
	if r > 0 && full && l.units[0] < d.at {
		for range r {
			kept = append([]int64{l.units[0]}, kept...)
		}
	}
	l.units = kept
}

// departures returns the model's units as departures of cost 1.
func (l *logModel) departures() []departure {
	ds := make([]departure, len(l.units))
	for i, u := range l.units {
		ds[i] = departure{u, 1}
	}
	return ds
}

// propReservation is a booking the trace may cancel.
type propReservation struct {
	r   store.Reservation
	dep departure
}

func runProperty(t *testing.T, m model, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	clk := fakeclock.New(time.UnixMicro(1_700_000_000_000_000 + rng.Int64N(propPeriod)))
	s := localstore.New(clk)
	var ds []departure
	var open []propReservation
	var last int64 // the latest departure ever booked
	var lm *logModel
	if m.b.Algorithm == store.SlidingLog {
		lm = &logModel{q: m.b.Burst}
	}
	for i := range 400 {
		clk.Advance(time.Duration(rng.IntN(250_000)) * time.Microsecond)
		now := clk.Now().UnixMicro()
		if len(open) > 0 && rng.IntN(10) == 0 {
			// A waiter gives up before its departure.
			k := rng.IntN(len(open))
			if o := open[k]; o.dep.at > now {
				if err := o.r.Cancel(ctx); err != nil {
					t.Fatal(err)
				}
				for j, d := range ds {
					if d == o.dep {
						ds = append(ds[:j], ds[j+1:]...)
						break
					}
				}
				if lm != nil {
					lm.cancel(now, o.dep)
				}
			}
			open = append(open[:k], open[k+1:]...)
		}
		b := m.b
		b.Cost = 1 + rng.Int64N(min(b.Burst, 3))
		long := rng.IntN(3) > 0
		maxWait := time.Duration(rng.IntN(500_000)) * time.Microsecond
		if long {
			maxWait = time.Hour
		}
		r, err := s.Reserve(ctx, []store.Bucket{b}, maxWait)
		if err != nil {
			t.Fatal(err)
		}
		if r.Wait < 0 {
			t.Fatalf("request %d: negative wait %v", i, r.Wait)
		}
		if long && !r.OK {
			t.Fatalf("request %d: refused with a wait of %v under an hour's budget (starved)", i, r.Wait)
		}
		at := now + r.Wait.Microseconds()
		if m.fits != nil {
			seen := ds // what the algorithm decides on
			if lm != nil {
				seen = lm.departures()
			}
			floor := now
			if m.fifo {
				for _, d := range seen {
					floor = max(floor, d.at)
				}
			}
			if m.keep {
				floor = max(floor, last)
			}
			if at < floor || !m.fits(seen, at, b.Cost) {
				t.Fatalf("request %d of cost %d at now%+d: the model refuses its departure now%+d", i, b.Cost, 0, at-now)
			}
			if at > floor {
				// The probes: a µs earlier, the floor, and the last µs of
				// every window between them (where a window algorithm's
				// room is largest; the fixed window's is the same
				// throughout).
				probes := []int64{at - 1, floor}
				if !m.monotone {
					for x := fixedStartOf(m, at); x > floor; x -= propPeriod {
						probes = append(probes, x-1, x)
					}
				}
				for _, x := range probes {
					if x >= floor && x < at && m.fits(seen, x, b.Cost) {
						t.Fatalf("request %d: departs at now%+d but fits at now%+d", i, at-now, x-now)
					}
				}
			}
		}
		if r.OK {
			d := departure{at, b.Cost}
			ds = append(ds, d)
			last = max(last, at)
			open = append(open, propReservation{r, d})
			m.quota(t, ds, d)
			if lm != nil {
				lm.book(now, d)
			}
		}
	}
	if len(ds) < 50 {
		t.Fatalf("only %d bookings: the trace tests little", len(ds))
	}
}

// TestPauseHoldsEveryAlgorithm checks that after a pause nothing departs
// before its end, and that the bucket refills from empty after it.
func TestPauseHoldsEveryAlgorithm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, m := range models() {
		t.Run(m.name, func(t *testing.T) {
			clk := fakeclock.New(time.UnixMicro(1_700_000_000_000_000)) // a window boundary of the sliding ones
			s := localstore.New(clk)
			b := m.b
			b.Cost = 1
			if _, err := s.Reserve(ctx, []store.Bucket{b}, 0); err != nil {
				t.Fatal(err)
			}
			if err := s.Pause(ctx, []store.Bucket{b}, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			var waits []time.Duration
			for range 5 {
				r, err := s.Reserve(ctx, []store.Bucket{b}, time.Hour)
				if err != nil || !r.OK {
					t.Fatalf("reserve: %+v, %v", r, err)
				}
				if r.Wait < 3*time.Second {
					t.Fatalf("departs after %v, inside the pause of 3s", r.Wait)
				}
				waits = append(waits, r.Wait)
			}
			t.Logf("after a 3s pause, five requests depart at %v", waits)
			switch m.b.Algorithm {
			case store.TokenBucket:
				if waits[0] != 3*time.Second+200*time.Millisecond {
					t.Fatalf("first departure %v, want 3.2s: no tokens at the pause's end", waits[0])
				}
			case store.SlidingLog, store.SlidingCounter:
				// Refilling from empty: the quota comes back over a Period,
				// never all at the pause's end.
				if waits[4] == waits[0] {
					t.Fatalf("all five depart at %v: a burst at the pause's end", waits[0])
				}
			case store.FixedWindow:
				// The pause ends inside the window at anchor 0.25s: the
				// rest of it counts full, the next window starts fresh.
				if waits[0] != 3250*time.Millisecond || waits[4] != waits[0] {
					t.Fatalf("departures %v, want all five at 3.25s, the next boundary", waits)
				}
			}
		})
	}
}
