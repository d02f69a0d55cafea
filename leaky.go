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
// it while that lies within the bucket's lead (half its lateness, see
// store.Bucket.Lead) of the departure, and is deferred (booked when the
// request departs) beyond it.
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
// with the leaky bucket's interval and lateness, which the Transport's
// waiters and a feedback cap read.
func newBucket(a Algorithm, l Limit, headroom float64) leakyBucket {
	if !a.windowed() {
		return newLeakyBucket(l, headroom)
	}
	l.Burst = int(windowQuota(l, headroom))
	if a == SlidingLog {
		// Its headroom is in its window instead (slidingLogWindow).
		l.Burst = l.Rate
	}
	return newLeakyBucket(l, headroom)
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

// latenessFor returns how late after its slot a request of a rule may
// still leave: half the rule's headroom of its Period (h·P/2), at least
// minLateness; a rule without headroom, which has no slack to share, one
// interval (one request over the bucket's bound at most).
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
//
// The bound holds at every rate, so the lateness is not floored at one
// interval, as it was before 2026-12-06: a rule of 25/s at 5 % headroom
// then allowed 42 ms of the 52.6 ms, and a request booked that early in a
// bucket that did not set its departure (store.Bucket.Lead) was seen
// later still; examples/stripe met one 429 of that kind in 2 of 22 runs.
// A request's lateness in a bucket is its lead there plus how late its
// waiter wakes, and Transport.acquire's tolerance keeps the sum within L.
func latenessFor(l Limit, interval time.Duration, headroom float64) time.Duration {
	if headroom == 0 {
		return interval
	}
	h := float64(l.Period) * headroom / 2
	if h >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(h), minLateness)
}

// minLateness is the least lateness a rule with headroom allows, so that
// a waiter woken late only by the timer's own jitter still leaves on its
// slot instead of booking again (see latenessFor). Measured on the 2-core
// CI host (2026-12-06, 128 goroutines sleeping 1-50 ms for 5 s): timers
// woke late by 0.54 ms at the median, 3.2 ms at p99.9 and 5.6 ms at most
// when idle; 4.3 ms at p99.9 and 5.1 ms at most beside two busy loops. It
// sets the lateness only below 1 % of headroom at a period of a second.
const minLateness = 5 * time.Millisecond

// newLocalStore returns the store of a Transport without WithRedis: its
// buckets live in this process, in a map under one mutex, and a request
// books them without a round trip (see Transport.acquireOnce, which then
// reads the clock once).
func newLocalStore(c Clock) *localstore.Store { return localstore.New(c) }
