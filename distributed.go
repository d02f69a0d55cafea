package throttle

import (
	"context"
	"time"
)

// store books slots in buckets. It is the one seam between the Transport and
// where buckets live: in this process (localStore) or in Redis, shared by a
// fleet (redisStore). Both keep the same semantics, given here.
//
// Implementations must be safe for concurrent use.
type store interface {
	// reserve books one slot in every bucket of bs, all or nothing, if the
	// request can depart within maxWait, and returns the wait until it may
	// depart. Each bucket is booked at the request's earliest time in it;
	// the request departs at the latest of those times. When the wait
	// would exceed maxWait nothing is booked and the reservation has ok
	// false and the wait that would have been needed. An error means the
	// store could not decide; nothing was booked. The reservation gives
	// its booking back itself (reservation.cancel).
	reserve(ctx context.Context, bs []bucket, maxWait time.Duration) (reservation, error)

	// pause holds every bucket of bs shut for d from the store's now: the
	// next request departs no earlier, and the bucket refills from empty.
	pause(ctx context.Context, bs []bucket, d time.Duration) error

	// limit caps bucket b as c says, from the store's now, replacing any
	// cap in force; it never loosens the rule. While a cap (even one of
	// rate 0, which caps nothing) is in force, the store counts the units
	// the replicas report sent in the bucket (bucket.sent, added when a
	// request is booked) and reports the count with every reservation
	// (reservation.counts): the fleet's own traffic, which quotaview.go
	// sets against what the server says it counted.
	limit(ctx context.Context, b bucket, c capSpec) error

	// held returns how long a pause (see pause) still holds any bucket of
	// bs, or 0.
	held(ctx context.Context, bs []bucket) (time.Duration, error)
}

// capSpec is a cap for store.limit: rate units of cost per second from the
// store's now (0: no cap, count only), climbing by slope per second, for
// span.
type capSpec struct {
	rate  float64
	slope float64
	span  time.Duration
}

// bucket is one bucket a request needs, with the parameters of its rule.
type bucket struct {
	key      string        // unique within a Transport: the rule name, then the hashed partition key
	rule     string        // the rule's name, for errors
	interval time.Duration // emission interval per unit of cost
	burst    int64         // capacity, in units of cost
	cost     int64         // this request's weight, 1 ≤ cost ≤ burst
	// lateness is how late after its slot a waiter may still leave: the
	// jitter the rule's headroom pays for (see compileRules).
	lateness time.Duration
	// rate per period is the rule's Limit as written, and headroom the
	// rule's headroom: what quotaview.go reads the server's answers against.
	rate     int64
	period   time.Duration
	headroom float64
	// sent is the units of cost this process sent in the bucket since it
	// last reported them to the store: reserve adds them to the bucket's
	// count (see store.limit) when it books the request.
	sent int64
}

// reservation is a store's answer to reserve. It owns its undo, as
// golang.org/x/time/rate's Reservation owns its limiter: cancel gives the
// booking back in whichever store made it, so no store needs to tell from
// the reservation's shape who made it. A reservation is a value and may be
// copied: every copy names the same booking (undo is a pointer, or a value
// naming the booking by an identity of its own, never the address of a
// slice element), and the booking goes back at most once, whichever copy
// cancels it and however often.
type reservation struct {
	ok      bool
	wait    time.Duration // until departure when ok; the wait needed when not
	limiter int           // index in buckets of the bucket that set the wait
	buckets []bucket
	// deferred holds the indices in buckets of the buckets not booked now,
	// in order, or nil: those whose slot comes longer before the departure
	// than the bucket's lateness tolerance. Booking them ahead of time
	// would either waste their capacity until the departure or let the
	// request leave later than they counted it; the Transport books them
	// at the departure, in a second call (see rest).
	deferred []int
	// counts holds, for each bucket the store counts (see store.limit), 1
	// plus the units the fleet reported sent in it so far, this request's
	// report (bucket.sent) included; 0 for a bucket not counted or
	// deferred. It may be nil when none is counted. Only differences of
	// counts mean anything.
	counts []int64
	// held, when not 0, is how long from the store's decision a pause
	// lasts in one of the buckets (the latest end, if several): one that a
	// response told this process or another replica of (store.pause). The
	// Transport sends its waiters booked before the pause to book again
	// after it (waitQueue.hold). The Redis store reports it; the local
	// store, whose one process already holds its waiters, does not.
	held time.Duration
	// unreported is set when the store took no report of units sent
	// (bucket.sent) with the booking: the outage store booked it in an
	// outage mode (local share buckets, or fail open), which keeps no
	// counts.
	unreported bool
	// undo gives the booking back (see cancel); nil when nothing was
	// booked that could go back.
	undo undo
}

// undo gives a booking back. Each store makes its own, holding what it needs
// to find the booking again. cancel gives back the booking's slot in every
// bucket where it is still the last one booked: a slot with later bookings
// behind it stays spent, and the requests behind keep their place in the
// queue. It does so once: later calls, from any copy of the reservation,
// do nothing and return nil. An error means the store could not be told;
// the slots it could not reach stay spent, which errs on the side of the
// limit.
type undo interface {
	cancel(ctx context.Context) error
}

// cancel gives r's booking back (see undo). It is safe to call on any copy
// of r, any number of times, and on a reservation that booked nothing.
func (r *reservation) cancel(ctx context.Context) error {
	if r.undo == nil {
		return nil
	}
	return r.undo.cancel(ctx)
}

// count returns the count of bucket i (see counts), or 0.
func (r *reservation) count(i int) int64 {
	if i < len(r.counts) {
		return r.counts[i]
	}
	return 0
}

// isDeferred reports whether bucket i was deferred (see deferred).
func (r *reservation) isDeferred(i int) bool {
	for _, j := range r.deferred {
		if j == i {
			return true
		}
	}
	return false
}

// reported reports whether the store took bucket i's report of units sent
// (bucket.sent): it did when it booked the bucket now in a store that keeps
// counts.
func (r *reservation) reported(i int) bool {
	return r.ok && !r.unreported && i < len(r.buckets) && !r.isDeferred(i)
}

// rest returns the buckets of r not booked yet (see deferred), or nil.
func (r *reservation) rest() []bucket {
	if len(r.deferred) == 0 {
		return nil
	}
	rest := make([]bucket, len(r.deferred))
	for j, i := range r.deferred {
		rest[j] = r.buckets[i]
	}
	return rest
}

// waitError is the error of a reservation that is not ok: the wait it
// needed exceeds budget, for reason (ErrBeyondDeadline or
// ErrBeyondMaxWait).
func (r *reservation) waitError(budget time.Duration, reason error) *WaitError {
	return &WaitError{Rule: r.buckets[r.limiter].rule, Wait: r.wait, Budget: budget, Err: reason}
}
