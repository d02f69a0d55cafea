package throttle

import (
	"fmt"
	"math"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// Algorithm is how a rule counts its Limit: the queue of a leaky bucket
// (the default), a token bucket, or one of three windows. Every algorithm
// makes a request that does not fit wait for the earliest instant it does
// (within WithMaxWait and its context), booking that instant at once so
// that waiters queue without polling, and gives the booking back when the
// wait is cancelled (see docs/ALGORITHMS.md for where it cannot). A
// request matched by rules of different algorithms is booked in all of
// them at once, or in none.
//
// The zero Algorithm is LeakyBucket. An Algorithm is a plain value, safe to
// copy and share.
type Algorithm uint8

const (
	// LeakyBucket is a queue run by the generic cell rate algorithm: Rate
	// per Period, one unit of cost every Period/Rate, Burst at once. It
	// suits the providers that drain a bucket, such as Shopify's REST API
	// (a bucket of 40 draining 2 a second). The zero Algorithm.
	LeakyBucket Algorithm = iota
	// TokenBucket holds Burst tokens, refilled at Rate per Period; a
	// request takes its cost in tokens. With waits booked ahead it makes
	// the leaky bucket's decisions, except after a pause: the leaky
	// bucket lets one request go at the pause's end, the token bucket has
	// no tokens then and refills from there.
	TokenBucket
	// FixedWindow lets at most Rate units of cost depart in each window of
	// Period, on boundaries at multiples of Period since the Unix epoch
	// (an hourly window resets on the hour, as GitHub's does). Up to twice
	// Rate can depart within one Period across a boundary. Burst must be 0:
	// a window's whole quota may go at once.
	FixedWindow
	// SlidingLog keeps the departure time of every unit of cost of the
	// last Period and lets at most Rate of them lie in any Period: exact,
	// at the price of memory per unit of Rate. Burst must be 0.
	SlidingLog
	// SlidingCounter estimates the units of the last Period from two fixed
	// windows, the previous window's count weighted by the fraction of it
	// still inside the sliding window, plus the current window's count, and
	// keeps the estimate at most Rate: nearly a sliding log, in the memory
	// of a fixed window. Burst must be 0.
	SlidingCounter
)

// String returns the algorithm's Go name, such as "FixedWindow", or
// "Algorithm(9)" for a value that names none.
func (a Algorithm) String() string {
	switch a {
	case LeakyBucket:
		return "LeakyBucket"
	case TokenBucket:
		return "TokenBucket"
	case FixedWindow:
		return "FixedWindow"
	case SlidingLog:
		return "SlidingLog"
	case SlidingCounter:
		return "SlidingCounter"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// storeAlgorithm returns the store's code for a, which the stores and the
// Redis scripts dispatch on.
func (a Algorithm) storeAlgorithm() store.Algorithm {
	switch a {
	case TokenBucket:
		return store.TokenBucket
	case FixedWindow:
		return store.FixedWindow
	case SlidingLog:
		return store.SlidingLog
	case SlidingCounter:
		return store.SlidingCounter
	}
	return store.LeakyBucket
}

// windowed reports whether a counts in windows of Period (and has no
// Burst).
func (a Algorithm) windowed() bool {
	return a == FixedWindow || a == SlidingLog || a == SlidingCounter
}

// maxWindowProduct bounds a window rule's quota times its Period in
// microseconds: the Redis scripts hold both in Lua doubles, exact below
// 2^53, and multiply them.
const maxWindowProduct = 1 << 53

// checkAlgorithm validates the fields of rule r that depend on its
// algorithm; bad builds the error. It returns nil for a valid rule.
func checkAlgorithm(r *Rule, bad func(field, reason string) error) error {
	a := r.Algorithm
	switch {
	case a > SlidingCounter:
		return bad("Algorithm", fmt.Sprintf("unknown algorithm %v", a))
	case a.windowed() && r.Limit.Burst != 0:
		return bad("Limit.Burst", fmt.Sprintf(
			"must be 0 for %v, got %d: a window's quota (Rate) may depart at once, so a burst means nothing there", a, r.Limit.Burst))
	case !a.windowed() && r.Limit.Burst < 1:
		return bad("Limit.Burst", fmt.Sprintf("must be >= 1, got %d", r.Limit.Burst))
	case a.windowed() && r.Limit.Period < time.Microsecond:
		return bad("Limit.Period", fmt.Sprintf("must be at least 1µs for %v, got %v", a, r.Limit.Period))
	case a.windowed() && float64(r.Limit.Rate)*float64(r.Limit.Period/time.Microsecond) >= maxWindowProduct:
		return bad("Limit.Rate", fmt.Sprintf(
			"%d per %v is beyond %v: Rate times Period in microseconds must stay below 2^53", r.Limit.Rate, r.Limit.Period, a))
	}
	return nil
}

// windowQuota returns the quota per window of a window rule of Limit l kept
// headroom below its rate: ⌊Rate·(1-headroom)⌋, at least 1.
func windowQuota(l Limit, headroom float64) int64 {
	q := math.Floor(float64(l.Rate) * (1 - headroom))
	return max(int64(q), 1)
}

// slidingLogWindow returns the window a SlidingLog rule of Limit l keeps
// its log over: Period plus the rule's headroom of it (at most
// maxWindowGuard). Its quota is then the whole Rate (see newBucket). The
// log holds each request at the instant the fleet booked it, but the
// server counts it when it arrives, a transit, a wake-up and a pacing
// later, and those delays vary: a request the log lets go the moment the
// oldest one leaves it reaches the server before the server's oldest one
// has left its window whenever the new one's delay is the shorter
// (measured: 2-4 rejections a run in internal/algorithmtest's sliding-log
// cell with a window of Period and a quota of Rate less the headroom).
// A window longer by the headroom keeps the requests it separates apart by
// a Period at the server for delays that differ by up to the headroom of
// the window, the lateness a waiter may have (see latenessFor), at the
// same average rate as a quota less the headroom.
func slidingLogWindow(l Limit, headroom float64) time.Duration {
	return l.Period + guardOf(l.Period, headroom)
}

// windowEdge returns a FixedWindow or SlidingCounter rule's
// store.Bucket.Edge: the rule's headroom of its window, at most
// maxWindowGuard, kept free of slots at both ends of each window (see
// algorithm.FixedAt); 0 for the sliding log, whose longer window
// (slidingLogWindow) does it, and the buckets, whose burst and lateness
// do. A window's boundary is an instant in the fleet's clock (Redis's)
// where the server's count changes, and the server's clock, the wait's
// estimate (half the store call's round trip, see acquireOnce) and the
// transit are off by an unknown amount.
//
// At a window's start: a request that leaves 12 µs before its window
// starts is counted in the full window before it and rejected (measured:
// one rejection a run at a window of 1 s, internal/algorithmtest's fixed
// cell, with no edge there; 2 of a fleet's first requests at 20/s reached
// the server in the last 15 ms of the window before theirs, in 1 run of 4
// of TestFleetWindowStartsBeforeABoundary's cell, when it counted from
// the store's slot rather than the slot as reckoned here).
//
// At its end: a request booked in the edge's span before a boundary
// reaches the server after it, a transit and a wake-up later, and the
// server counts it in the next window beside that window's whole quota,
// which the fleet books at its start: measured, a fleet of four that
// started 8 ms before a Unix second met 6 rejections within 9 ms after it
// (internal/algorithmtest, fixed/xrl-delta, without the race detector),
// and TestFleetWindowStartsBeforeABoundary's cells that start 15 ms before
// one met 1 (100/s) and 7 (20/s) at 9-30 ms past it with no edge there.
// The stores book such a request in the next window instead, where the
// server counts it too; a window's quota is then spent in its span less
// the two edges. A SlidingCounter rule's edge is the same: a request that
// crosses a boundary weighs at full weight on the server's side of it and
// at a falling weight on the rule's, and a fleet that started 8-15 ms
// before a Unix second met 1-8 rejections spread over its first window
// with no edge there (TestFleetWindowStartsBeforeABoundary's
// sliding-counter cells).
//
// The edge at a window's start was the Transport's guard before
// 2026-12-07: a waiter left the guard after its slot, which kept a fixed
// window's waiters (slotted at a window's start) off the boundary but
// moved a sliding counter's mid-window slots, spread through the window,
// into the end's edge: those in the last two edges of a window left in
// its last, which at a saturated 100/s is about the 2 units of the
// quota's headroom every window (see docs/ALGORITHMS.md).
func windowEdge(a store.Algorithm, window time.Duration, headroom float64) time.Duration {
	if !a.Edged() {
		return 0
	}
	return guardOf(window, headroom)
}

// guardOf returns the guard of a window rule of period p kept headroom
// below its rate: the headroom of p, at most maxWindowGuard.
func guardOf(p time.Duration, headroom float64) time.Duration {
	return min(time.Duration(headroom*float64(p)), maxWindowGuard)
}

// maxWindowGuard bounds a window's edge: a second covers any clock skew NTP
// leaves between hosts, and an hourly window does not wait 72 s.
const maxWindowGuard = time.Second
