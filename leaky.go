package throttle

import (
	"math"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// This file holds the generic cell rate algorithm (GCRA), the leaky bucket
// run as a queue that every store shares. A bucket is one number, its
// theoretical arrival time (TAT): the time at which it would be empty if no
// more requests came. A request of cost c at time now conforms from
//
//	allowAt = max(TAT, now) + c·interval - burst·interval
//
// on, and booking it at its departure time d moves TAT to max(TAT, d) +
// c·interval. A bucket whose TAT has passed is indistinguishable from a new
// one, which is what lets idle buckets be dropped (local store) or expire
// (Redis). All arithmetic saturates, so huge periods or costs cannot wrap.
//
// reserve.lua runs the same steps in Redis, in microseconds.

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

// LeakyBucket is a GCRA leaky bucket for use within one process: the
// building block of the Transport's local store, usable on its own in the
// manner of [golang.org/x/time/rate.Limiter].
//
// A request of cost n conforms when the bucket has room for n; otherwise
// ReserveN books the next slot and says how long to wait for it. The zero
// value is not usable; create one with [NewLeakyBucket]. A LeakyBucket is
// safe for concurrent use.
type LeakyBucket struct {
	interval time.Duration
	burst    int64

	mu  sync.Mutex
	tat int64 // Unix nanoseconds
}

// NewLeakyBucket returns a bucket enforcing l, full (a burst is available at
// once). It reports an invalid l with a [*RuleError] naming the field.
func NewLeakyBucket(l Limit) (*LeakyBucket, error) {
	rules, err := compileRules([]Rule{{Name: "LeakyBucket", Limit: l}}, 0)
	if err != nil {
		return nil, err
	}
	return &LeakyBucket{interval: rules[0].interval, burst: rules[0].burst}, nil
}

// Allow reports whether one request may go now, and books it if so.
func (b *LeakyBucket) Allow() bool { return b.AllowN(time.Now(), 1) }

// AllowN reports whether a request of cost n may go at time now, and books
// it if so. A cost above the burst is never allowed.
func (b *LeakyBucket) AllowN(now time.Time, n int) bool {
	_, ok := b.ReserveN(now, n, 0)
	return ok
}

// ReserveN books a slot for a request of cost n at time now if the request
// can depart within maxWait, and returns the wait until its slot. When the
// wait exceeds maxWait, or n exceeds the burst, nothing is booked, ok is
// false, and wait is the wait that would have been needed (math.MaxInt64
// when n exceeds the burst).
func (b *LeakyBucket) ReserveN(now time.Time, n int, maxWait time.Duration) (wait time.Duration, ok bool) {
	cost := max(int64(n), 1)
	if cost > b.burst {
		return store.WaitNever, false
	}
	t := now.UnixNano()
	iv := int64(b.interval)
	b.mu.Lock()
	at := gcraAllowAt(b.tat, t, iv, b.burst, cost)
	wait = time.Duration(at - t)
	if wait > maxWait {
		b.mu.Unlock()
		return wait, false
	}
	b.tat = gcraBook(b.tat, at, iv, cost)
	b.mu.Unlock()
	return wait, true
}

// rateCap holds a bucket below its rule's rate while the server's answers
// say the fleet has less room than the rule (see quotaview.go): the rate is
// rate0 at time t0 and climbs by slope per second, until until. A rate0 of
// 0 caps nothing: the bucket is then only counted (see store.limit). Times
// are in the store's units (ns locally, µs in Redis), rates in units of
// cost per second.
type rateCap struct {
	rate0 float64
	t0    int64
	slope float64
	until int64
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
