package localstore

import (
	"math"

	"github.com/throttlekit/throttle/internal/store"
)

// This file holds the maths of the generic cell rate algorithm (GCRA), in
// the store's units (Unix nanoseconds, nanoseconds per unit of cost). The
// root's leaky.go tells the algorithm as a rule's; internal/redisstore's
// reserve.lua runs the same steps in Redis, in microseconds, and the
// root's parity tests hold both to the same decisions. All arithmetic
// saturates, so huge periods or costs cannot wrap.

// gcraAllowAt returns the earliest time a request of cost units conforms to
// a bucket with the given TAT, never earlier than now.
func gcraAllowAt(tat, now, interval, burst, cost int64) int64 {
	// max(TAT, now) + (cost-burst)·interval, computed as one subtraction
	// (or addition) of a non-negative term so that a saturated TAT still
	// yields the right answer instead of wrapping through zero.
	base := max(tat, now)
	var at int64
	if cost <= burst {
		at = base - store.SatMul(interval, burst-cost)
	} else {
		at = store.SatAdd(base, store.SatMul(interval, cost-burst))
	}
	return max(at, now)
}

// gcraBook returns the TAT of a bucket after a request of cost units departs
// at time at.
func gcraBook(tat, at, interval, cost int64) int64 {
	return store.SatAdd(max(tat, at), store.SatMul(interval, cost))
}

// gcraPause returns the TAT that holds a bucket shut until the time until:
// the next request of cost 1 conforms at until, and the bucket refills from
// empty afterwards, so a pause never ends in a burst.
func gcraPause(tat, until, interval, burst int64) int64 {
	return max(tat, store.SatAdd(until, store.SatMul(interval, burst-1)))
}

// rateCap holds a bucket below its rule's rate while the server's answers
// say the fleet has less room than the rule (see internal/feedback): the rate is
// rate0 at time t0 and climbs by slope per second, until until. A rate0 of
// 0 caps nothing: the bucket is then only counted (see store.Store.Limit). Times
// are in the store's units (ns locally, µs in Redis), rates in units of
// cost per second.
type rateCap struct {
	rate0 float64
	t0    int64
	slope float64
	until int64
	paid  float64 // the count's debt paid so far (store.Cap.Debt)
}

// intervalAt returns the emission interval in force at now for a bucket
// whose rule has interval iv, given unitsPerSecond store time units per
// second (1e9 locally, 1e6 in Redis). A cap never loosens a rule.
func (a rateCap) intervalAt(iv, now int64, unitsPerSecond float64) int64 {
	if now >= a.until {
		return iv
	}
	rate := a.rate0 + a.slope*float64(now-a.t0)/unitsPerSecond
	if rate <= 0 {
		return iv
	}
	adapted := unitsPerSecond / rate
	if adapted >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return max(iv, int64(math.Ceil(adapted)))
}

// gcraCharge returns the TAT of a bucket of burst units charged units more
// of cost at now: later by units intervals, from now if the bucket had
// room. A negative charge is a refund, given only to a bucket with no
// request booked ahead of now: earlier by -units intervals, never before
// now.
//
// Why only then. A bucket whose TAT lies beyond now + burst intervals has
// requests booked to leave later (a booking that waits leaves burst
// intervals before the TAT it sets, and TATs only grow); one whose TAT
// lies within has none. Moving the TAT of the first earlier would place
// the next bookings among those already booked, and the units refunded
// would leave on top of them: measured, a fleet refunded so met 5-8
// rejections in 5 s from a strict server with twice the rule's burst that
// the same fleet without refunds never met (internal/concurrencytest,
// TestFleetActualCosts). Store.Charge gives such a refund as a credit
// instead (credit.go).
func gcraCharge(tat, now, interval, burst, units int64) int64 {
	if units >= 0 {
		return store.SatAdd(max(tat, now), store.SatMul(interval, units))
	}
	if tat <= now || tat-now > store.SatMul(interval, burst) {
		return tat
	}
	back := store.SatMul(interval, -units)
	if tat-now <= back {
		return now
	}
	return tat - back
}
