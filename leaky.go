package throttle

import (
	"math"
	"time"

	"github.com/throttlekit/throttle/internal/localstore"
)

// This file holds the leaky bucket as a rule's algorithm: how a Rule's
// Limit becomes a bucket's parameters, and which store runs the bucket for
// a Transport without WithRedis.
//
// A Limit of Rate per Period with Burst is a leaky bucket run as a queue by
// the generic cell rate algorithm (GCRA). Each unit of cost occupies the
// bucket for one emission interval, Period/Rate (less the headroom, see
// WithHeadroom), and the bucket holds Burst units. A bucket is one number,
// its theoretical arrival time (TAT): the time at which it would be empty
// if no more requests came. A request of cost c arriving at now may leave
// at
//
//	allowAt = max(TAT, now) + c·interval - burst·interval
//
// or now, whichever is later: its wait is allowAt - now, and a wait beyond
// the request's budget (WithMaxWait, the context's deadline) books
// nothing. Booking it at its departure time d moves TAT to max(TAT, d) +
// c·interval. A bucket whose TAT has passed is indistinguishable from a new
// one, which is what lets idle buckets be dropped (the local store sweeps
// them) or expire (Redis keys, PX). All arithmetic saturates, so huge
// periods or costs cannot wrap.
//
// A request that several rules match leaves at the latest of its buckets'
// times; each other bucket is booked at the request's own earliest time in
// it while that lies within the bucket's lateness tolerance of the
// departure, and is deferred (booked when the request departs) beyond it.
//
// The stores run the maths: internal/localstore in this process (the store
// of a Transport without WithRedis, see newLocalStore), in nanoseconds;
// internal/redisstore's reserve.lua in Redis, in microseconds. The root's
// parity tests hold both to the same decisions.

// leakyBucket is a rule's bucket parameters, as every store runs them
// (store.Bucket's Interval, Burst and Lateness).
type leakyBucket struct {
	interval time.Duration // emission interval per unit of cost, after headroom
	burst    int64
	lateness time.Duration // see store.Bucket.Lateness
}

// newLeakyBucket returns the bucket of a rule of Limit l kept headroom below
// its rate. The interval is 0 for a rate of more than one unit a
// nanosecond, which compileRules rejects.
func newLeakyBucket(l Limit, headroom float64) leakyBucket {
	iv := l.interval(headroom)
	return leakyBucket{interval: iv, burst: int64(l.Burst), lateness: latenessFor(l, iv, headroom)}
}

// newBucket returns the bucket parameters of a rule of algorithm a: the
// leaky bucket's for LeakyBucket and TokenBucket (the token bucket runs
// the same maths, see algorithm.go), and for a window algorithm the
// window's quota (Rate less the headroom, see windowQuota) as the burst,
// with the leaky bucket's interval and lateness (at most half the rule's
// edge, windowEdge, for a window with edges), which the Transport's
// waiters and a feedback cap read.
func newBucket(a Algorithm, l Limit, headroom float64, edge time.Duration) leakyBucket {
	if !a.windowed() {
		return newLeakyBucket(l, headroom)
	}
	l.Burst = int(windowQuota(l, headroom))
	if a == SlidingLog {
		// Its headroom is in its window instead (slidingLogWindow).
		l.Burst = l.Rate
	}
	lb := newLeakyBucket(l, headroom)
	if edge > 0 {
		// A window with edges keeps every slot an edge from its end, for
		// the transit and the clocks' skew; a waiter late by more than
		// that would reach the server in the next window, which counts it
		// beside its whole quota (a fixed window) or at full weight (a
		// sliding counter). The lateness gets half, as latenessFor's
		// model shares the headroom. A sliding counter's waiters are
		// slotted anywhere in the window, up to its last edge; at low
		// rates an interval (51 ms at 20/s) is more than the edge (20 ms
		// of a 1 s window).
		lb.lateness = min(lb.lateness, edge/2)
	}
	return lb
}

// interval returns the emission interval of l with the given headroom: the
// time one unit of cost occupies in the bucket. It saturates instead of
// overflowing for huge periods.
func (l Limit) interval(headroom float64) time.Duration {
	iv := float64(l.Period) / (float64(l.Rate) * (1 - headroom))
	if iv >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(iv)
}

// latenessFor returns how late after its slot a waiter of a rule may still
// leave: the longer of one interval and half the rule's headroom of its
// Period (for a window with edges, at most half an edge: see newBucket). A request late by up to one interval can share a moment with the
// next slot, one request over the bucket's bound at most, which the pacing
// of waiters keeps from stacking within a process.
//
// Why half the headroom. A strict server counting R in any window of P
// sees each request at its slot plus its lateness plus what nobody
// controls (the wake-up after the slot, the trip to the server), J. The
// slots of a rule kept headroom h below R lie 1/((1-h)·R) of P apart, so
// an interval of P + L + J holds at most R of them while L + J stays
// below h·P/(1-h), about the headroom of the Period: the lateness and J
// share that budget. With all of it for the lateness (L = h·P, the rule
// before), J had 0.4 ms at 100/s: a Stripe-like server of 100 in any
// second (throttletest's Stripe profile) met 1-2 rejections in 3 of 8 runs
// of examples/stripe on a quiet host. Half for each.
func latenessFor(l Limit, interval time.Duration, headroom float64) time.Duration {
	h := float64(l.Period) * headroom / 2
	if h >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(h), interval)
}

// newLocalStore returns the store of a Transport without WithRedis: its
// buckets live in this process, in a map under one mutex, and a request
// books them without a round trip (see Transport.acquireOnce, which then
// reads the clock once).
func newLocalStore(c Clock) *localstore.Store { return localstore.New(c) }
