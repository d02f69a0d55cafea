package localstore

import (
	"math"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/store"
)

// This file runs the window buckets (store.Algorithm.Windowed: fixed
// window, sliding log, sliding counter) with internal/algorithm's maths, in
// integer microseconds as internal/redisstore's window.lua does, so that
// the two stores decide alike; the clock's nanoseconds are rounded down to
// the microsecond (see floorMicros). A request with a window bucket takes this path; one of
// leaky and token buckets only keeps the GCRA path of store.go.

// windowState is a window bucket: its counts or log, and what Redis keeps
// in the bucket's envelope (window.lua): the end of its last pause and the
// TAT of a cap's own constraint. Times are Unix µs.
type windowState struct {
	w      algorithm.Window
	counts algorithm.Counts // fixed window, sliding counter
	log    algorithm.Log    // sliding log
	keep   int64            // how long past its last window the counts weigh: 0, or a Period for the sliding counter
	hold   int64
	capTAT int64
}

// live reports whether the state differs from a new one at now (µs).
func (ws *windowState) live(now int64) bool {
	if ws.hold > 0 && ws.hold+2*ws.w.Period > now || ws.capTAT > now || ws.counts.Last > now {
		return true
	}
	if e := ws.counts.End(ws.w); e > 0 && e+ws.keep > now {
		return true
	}
	n := len(ws.log.E)
	return n > 0 && ws.log.E[n-1]+ws.w.Period > now
}

// floorMicros converts Unix ns to µs, rounding down: the window
// algorithms decide at the microsecond, and a request allowed at the
// clock's microsecond departs now (wait 0, not the rest of the
// microsecond, which a maxWait of 0 would refuse).
func floorMicros(ns int64) int64 {
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

// micros converts a duration to µs, rounding up (redisstore.Micros).
func micros(d time.Duration) int64 { return ceilMicros(int64(d)) }

// windowOf returns the window of bucket b, in µs.
func windowOf(b *store.Bucket) algorithm.Window {
	p, anchor, edge := b.WindowMicros()
	return algorithm.Window{Period: p, Quota: b.Burst, Anchor: anchor, Edge: edge}
}

// windowLocked returns the state of window bucket b, made on first use.
// s.mu must be held.
func (s *Store) windowLocked(b *store.Bucket) *windowState {
	ws, ok := s.wins[b.Key]
	if !ok {
		ws = &windowState{}
		s.wins[b.Key] = ws
	}
	ws.w = windowOf(b)
	ws.keep = 0
	if b.Algorithm == store.SlidingCounter {
		ws.keep = ws.w.Period
	}
	return ws
}

// capIntervalLocked returns the interval in µs of a cap in force on b at
// now (ns) when it is slower than the rule's, or 0: a window bucket's cap
// is a GCRA constraint of burst 1 beside its windows (window.lua's
// capInterval). s.mu must be held.
func (s *Store) capIntervalLocked(b *store.Bucket, now int64) int64 {
	a, ok := s.caps[b.Key]
	if !ok || now >= a.until {
		return 0
	}
	rate := a.rate0 + a.slope*float64(now-a.t0)/1e9
	if rate <= 0 {
		return 0
	}
	civ := math.Ceil(1e6 / rate)
	if civ >= math.MaxInt64 {
		return math.MaxInt64
	}
	if c := int64(civ); c > micros(b.Interval) {
		return c
	}
	return 0
}

// windowAt returns the earliest time (µs) ≥ t at which window bucket b,
// with state ws and cap interval civ (0 for none), takes its request.
func windowAt(b *store.Bucket, ws *windowState, civ, now, t int64) int64 {
	if civ > 0 {
		t = max(t, max(ws.capTAT, now)+(b.Cost-1)*civ)
	}
	switch b.Algorithm {
	case store.FixedWindow:
		return algorithm.FixedAt(ws.w, &ws.counts, t, ws.hold, b.Cost)
	case store.SlidingCounter:
		return algorithm.CounterAt(ws.w, &ws.counts, t, ws.hold, b.Cost)
	default:
		return algorithm.LogAt(ws.w, &ws.log, t, ws.hold, b.Cost)
	}
}

// reserveWindowsLocked is Reserve for a request with a window bucket: as
// reserve.lua's loop, the leaky and token buckets set the departure first,
// then rounds move it to each window bucket's earliest time at or after
// it until none does. Window buckets are booked at the departure and never
// deferred. s.mu must be held.
func (s *Store) reserveWindowsLocked(bs []store.Bucket, now int64, maxWait time.Duration) store.Reservation {
	nowUs := floorMicros(now)
	depart, limiter := now, 0
	ats := make([]int64, len(bs))
	wss := make([]*windowState, len(bs))
	civs := make([]int64, len(bs))
	for i := range bs {
		b := &bs[i]
		if b.Algorithm.Windowed() {
			ws := s.windowLocked(b)
			if b.Algorithm == store.SlidingLog {
				ws.log.Trim(ws.w, nowUs)
			}
			wss[i], civs[i] = ws, s.capIntervalLocked(b, now)
			continue
		}
		ats[i] = gcraAllowAt(s.tats[b.Key], now, s.intervalLocked(*b, now), b.Burst, b.Cost)
		if ats[i] > depart {
			depart, limiter = ats[i], i
		}
	}
	for moved := true; moved; {
		moved = false
		for i := range bs {
			if wss[i] == nil {
				continue
			}
			if at := windowAt(&bs[i], wss[i], civs[i], nowUs, floorMicros(depart)) * 1000; at > depart {
				depart, limiter, moved = at, i, true
			}
		}
	}
	r := store.Reservation{Wait: time.Duration(depart - now), Limiter: limiter, Buckets: bs}
	if r.Wait > maxWait {
		return r
	}
	r.OK = true
	u := newLocalBooking(s, bs)
	r.Undo = u
	if len(s.caps) > 0 {
		r.Counts = make([]int64, len(bs))
	}
	for i := range bs {
		b := &bs[i]
		if ws := wss[i]; ws != nil {
			t := floorMicros(depart)
			switch b.Algorithm {
			case store.FixedWindow:
				u.prev[i] = algorithm.FixedBook(ws.w, &ws.counts, nowUs, t, b.Cost)
			case store.SlidingCounter:
				u.prev[i] = algorithm.CounterBook(ws.w, &ws.counts, nowUs, t, b.Cost)
			default:
				algorithm.LogBook(ws.w, &ws.log, nowUs, t, b.Cost)
				u.prev[i] = t
			}
			u.booked[i] = b.Cost
			if civs[i] > 0 {
				ws.capTAT = max(ws.capTAT, t) + b.Cost*civs[i]
			}
		} else {
			prev := s.tats[b.Key]
			iv := s.intervalLocked(*b, now)
			if depart-ats[i] > int64(b.Lateness) {
				r.Deferred = append(r.Deferred, i)
				continue
			}
			u.prev[i] = prev
			u.booked[i] = gcraBook(prev, ats[i], iv, b.Cost)
			s.tats[b.Key] = u.booked[i]
		}
		if r.Counts != nil && s.cappedLocked(b.Key, now) {
			s.counts[b.Key] += b.Sent
			r.Counts[i] = s.counts[b.Key]
		}
	}
	return r
}

// refundWindowLocked gives a window bucket's booking back at now (ns): the
// cost in the window starting at at (µs), or the entries at at for a
// sliding log, as far as algorithm.LogRefund can. s.mu must be held.
func (s *Store) refundWindowLocked(b store.Bucket, now, at, cost int64) {
	ws, ok := s.wins[b.Key]
	if !ok || cost == 0 {
		return
	}
	if b.Algorithm == store.SlidingLog {
		algorithm.LogRefund(windowOf(&b), &ws.log, floorMicros(now), at, cost)
		return
	}
	ws.counts.Add(ws.w, at, -cost)
}

// pauseWindowLocked holds window bucket b until until (ns) from now (ns).
// s.mu must be held.
func (s *Store) pauseWindowLocked(b store.Bucket, now, until int64) {
	if until <= now {
		return // as pause.lua: a pause of 0 holds nothing
	}
	ws := s.windowLocked(&b)
	ws.hold = max(ws.hold, ceilMicros(until)) // a pause is never shortened
}
