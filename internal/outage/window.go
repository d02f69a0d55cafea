package outage

import (
	"slices"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/store"
)

// This file is a window bucket's limiter in an outage (FixedWindow,
// SlidingLog, SlidingCounter): the rule's own algorithm from
// internal/algorithm, on this replica's share of the window's quota, where
// the leaky and token buckets run an x/time/rate Limiter (local.go). Each
// algorithm's limit is linear in what departs (a window's count, the
// log's entries in a Period, the counter's weighted estimate), so replicas
// that each keep to ⌊Quota·share⌋ in the algorithm's own sense, their
// shares summing to at most 1, keep the fleet to the quota in that sense
// too. A token bucket in their place lets its share's burst through on top
// of its refill, up to twice the share in one window (measured in
// TestFallbackWindowKeepsTheShare). Like the token buckets' burst, the
// local quota is floored at 1, so a fleet of more replicas than the quota
// has units can pass it.
//
// Times are Unix microseconds, as the other stores' window buckets decide.

// windowLimiter is one window bucket's local state. localBuckets' mutex
// guards it.
type windowLimiter struct {
	alg    store.Algorithm
	w      algorithm.Window // its Quota is this replica's share
	counts algorithm.Counts // fixed window, sliding counter
	log    algorithm.Log    // sliding log
	hold   int64            // the end of the latest pause (0: none)
}

// windowPart is what a windowLimiter booked for one part of a request: n
// units at ref, the window's start (fixed window, sliding counter) or the
// departure (sliding log), which a refund names.
type windowPart struct {
	ref, n int64
}

func newWindowLimiter(b *store.Bucket, share float64) *windowLimiter {
	p, anchor, edge := b.WindowMicros()
	wl := &windowLimiter{alg: b.Algorithm, w: algorithm.Window{Period: p, Anchor: anchor, Edge: edge}}
	wl.resize(b, share)
	return wl
}

// resize sizes the quota to share of b's (the rule's quota per window),
// keeping what is booked.
func (wl *windowLimiter) resize(b *store.Bucket, share float64) {
	_, q := sized(b, share)
	wl.w.Quota = int64(q)
}

// at returns the earliest time ≥ t at which n units (1 ≤ n ≤ Quota) fit.
func (wl *windowLimiter) at(t, n int64) int64 {
	switch wl.alg {
	case store.FixedWindow:
		return algorithm.FixedAt(wl.w, &wl.counts, t, wl.hold, n)
	case store.SlidingCounter:
		return algorithm.CounterAt(wl.w, &wl.counts, t, wl.hold, n)
	default:
		return algorithm.LogAt(wl.w, &wl.log, t, wl.hold, n)
	}
}

// bookAt counts n units departing at t, at now.
func (wl *windowLimiter) bookAt(now, t, n int64) windowPart {
	switch wl.alg {
	case store.FixedWindow:
		return windowPart{algorithm.FixedBook(wl.w, &wl.counts, now, t, n), n}
	case store.SlidingCounter:
		return windowPart{algorithm.CounterBook(wl.w, &wl.counts, now, t, n), n}
	default:
		algorithm.LogBook(wl.w, &wl.log, now, t, n)
		return windowPart{t, n}
	}
}

// book counts a request of cost units, at now: at its earliest time at or
// after floor, and no earlier than depart (the request's departure, which
// its other buckets set). A cost above the local quota goes in
// quota-sized parts, each after the one before, the last at or after
// depart: the parts before it are counted earlier than the request
// departs, which wastes them but never passes the quota. It returns the
// parts and when the last departs. Without book set it books nothing and
// only returns that time, which book would then give for the same
// arguments.
func (wl *windowLimiter) book(now, floor, depart, cost int64, book bool) ([]windowPart, int64) {
	if wl.alg == store.SlidingLog {
		wl.log.Trim(wl.w, now)
	}
	c := wl
	if !book && cost > wl.w.Quota {
		c = wl.clone()
	}
	var parts []windowPart
	t := floor
	for left := cost; left > 0; {
		n := min(left, c.w.Quota)
		left -= n
		if left == 0 {
			t = max(t, depart)
		}
		t = c.at(t, n)
		if book || left > 0 {
			parts = append(parts, c.bookAt(now, t, n))
		}
	}
	if !book {
		parts = nil
	}
	return parts, t
}

func (wl *windowLimiter) clone() *windowLimiter {
	c := *wl
	c.counts.N = slices.Clone(wl.counts.N)
	c.log.E = slices.Clone(wl.log.E)
	return &c
}

// refund gives back a part, at now, as far as the algorithm can (see
// algorithm.LogRefund for the sliding log's limits).
func (wl *windowLimiter) refund(now int64, p windowPart) {
	if wl.alg == store.SlidingLog {
		algorithm.LogRefund(wl.w, &wl.log, now, p.ref, p.n)
		return
	}
	wl.counts.Add(wl.w, p.ref, -p.n)
}

// pause holds the bucket until until: nothing departs before it, and the
// algorithm counts its window full until then (internal/algorithm).
func (wl *windowLimiter) pause(until int64) { wl.hold = max(wl.hold, until) }

// seed starts the limiter from sh's counts or log: the requests this
// replica booked in the shared bucket (localBuckets.shadowBook), which
// count in the server's windows as its local ones will.
func (wl *windowLimiter) seed(sh *windowLimiter) {
	wl.counts.First, wl.counts.Last = sh.counts.First, sh.counts.Last
	wl.counts.N = slices.Clone(sh.counts.N)
	wl.log.E = slices.Clone(sh.log.E)
}

// shadowBook counts, at now, the window buckets of bs booked in the
// shared bucket for a request departing at depart, so that a limiter made
// for them if Redis fails starts with this replica's part of the shared
// windows (startOutage). Each replica knows only its own part: the fleet
// keeps to the quota in the outage's first windows when every replica
// had kept to its share in the shared bucket, and may pass it by what
// the replicas above their share sent. Like the local buckets the shadow
// is swept when idle; a sliding log's keeps at most its quota of entries.
func (l *localBuckets) shadowBook(now, depart time.Time, bs []store.Bucket) {
	if !slices.ContainsFunc(bs, func(b store.Bucket) bool { return b.Algorithm.Windowed() }) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maybeSweep(now)
	nowUs, t := floorMicros(l.at(now)), floorMicros(depart)
	for i := range bs {
		b := &bs[i]
		if !b.Algorithm.Windowed() {
			continue
		}
		sh := l.shadow[b.Key]
		if sh == nil {
			sh = newWindowLimiter(b, 1)
			l.shadow[b.Key] = sh
		}
		if sh.alg == store.SlidingLog {
			sh.log.Trim(sh.w, nowUs)
		}
		at := t
		if sh.alg != store.FixedWindow {
			// Booked in order, as the sliding algorithms want: a
			// request that departs before one booked earlier (another
			// goroutine's call answered late) counts at the latest
			// departure, later than it went, never earlier.
			at = max(t, sh.counts.Last, lastEntry(sh.log.E))
		}
		sh.bookAt(nowUs, at, b.Cost)
	}
}

func lastEntry(e []int64) int64 {
	if len(e) == 0 {
		return 0
	}
	return e[len(e)-1]
}

// charge counts units more at t (see Store.Charge).
func (wl *windowLimiter) charge(t, units int64) {
	if wl.alg == store.SlidingLog {
		algorithm.LogBook(wl.w, &wl.log, t, t, min(units, wl.w.Quota))
		return
	}
	wl.counts.Add(wl.w, wl.w.Start(t), units)
}

// owed returns the units the bucket still counts at t, which a return
// books in the shared bucket (localBuckets.takeDebts): those in t's
// window and later ones (fixed window), the estimate at t and the later
// windows (sliding counter), the entries in the Period before t and later
// ones (sliding log); a bucket held at t is full. With waiting, only the
// units booked after t's window (the log: after t): the requests still
// waiting for their local slot.
func (wl *windowLimiter) owed(t int64, waiting bool) int64 {
	if wl.alg == store.SlidingLog {
		from := t - wl.w.Period
		if waiting {
			from = t
		} else if wl.hold > t {
			return wl.w.Quota
		}
		i, _ := slices.BinarySearch(wl.log.E, from+1)
		return int64(len(wl.log.E) - i)
	}
	s := wl.w.Start(t)
	if !waiting && wl.hold > t {
		return wl.w.Quota
	}
	var n int64
	for i, c := range wl.counts.N {
		start := wl.counts.First + int64(i)*wl.w.Period
		switch {
		case start > s || start == s && !waiting:
			n += c
		case start == s-wl.w.Period && !waiting && wl.alg == store.SlidingCounter:
			n += (c*(wl.w.Period-(t-s)) + wl.w.Period - 1) / wl.w.Period
		}
	}
	return n
}

// live reports whether the limiter differs from a new one at now: held,
// or counting or logging something that still weighs.
func (wl *windowLimiter) live(now int64) bool {
	if wl.hold > 0 && wl.hold+2*wl.w.Period > now || wl.counts.Last > now {
		return true
	}
	keep := int64(0)
	if wl.alg == store.SlidingCounter {
		keep = wl.w.Period
	}
	if e := wl.counts.End(wl.w); e > 0 && e+keep > now {
		return true
	}
	n := len(wl.log.E)
	return n > 0 && wl.log.E[n-1]+wl.w.Period > now
}

// floorMicros converts a time to Unix µs, rounding down, as the other
// stores do: a request allowed at the clock's microsecond departs now.
func floorMicros(t time.Time) int64 {
	ns := t.UnixNano()
	us := ns / 1000
	if ns%1000 < 0 {
		us--
	}
	return us
}

// ceilMicros converts ns to µs, rounding up.
func ceilMicros(ns int64) int64 {
	us := ns / 1000
	if ns%1000 > 0 {
		us++
	}
	return us
}
