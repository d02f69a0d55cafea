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
	// the request departs at the latest of those times. When the wait would exceed maxWait nothing is booked and the
	// reservation has ok false and the wait that would have been needed.
	// An error means the store could not decide; nothing was booked.
	reserve(ctx context.Context, bs []bucket, maxWait time.Duration) (reservation, error)

	// refund gives back the slots of r in every bucket where they are still
	// the last ones booked. A slot with later bookings behind it is not
	// refunded: the requests behind keep their place in the queue.
	refund(ctx context.Context, r *reservation) error

	// pause holds every bucket of bs shut for d from the store's now: the
	// next request departs no earlier, and the bucket refills from empty.
	pause(ctx context.Context, bs []bucket, d time.Duration) error

	// adapt applies the server's feedback to every bucket of bs: it may
	// slow a bucket below its rule for a while, never speed it up (see
	// adapt.go).
	adapt(ctx context.Context, bs []bucket, f feedback) error
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
}

// reservation is a store's answer to reserve.
type reservation struct {
	ok      bool
	wait    time.Duration // until departure when ok; the wait needed when not
	limiter int           // index in buckets of the bucket that set the wait
	buckets []bucket
	// prev and booked are each bucket's TAT before and after the booking,
	// in the store's own units, so that refund can tell whether its slot is
	// still the last one. booked[i] is 0 for a deferred bucket: one whose
	// slot comes longer before the departure than the bucket's lateness
	// tolerance. It is not booked now, since booking it ahead of time would
	// either waste its capacity until the departure or let the request
	// leave later than the bucket counted it; the Transport books it at the
	// departure, in a second call.
	prev, booked []int64
	// held, when not 0, is how long from the store's decision a pause
	// lasts in one of the buckets (the latest end, if several): one that a
	// response told this process or another replica of (store.pause). The
	// Transport sends its waiters booked before the pause to book again
	// after it (waitQueue.hold). The Redis store reports it; the local
	// store, whose one process already holds its waiters, does not.
	held time.Duration
}

// deferred returns the buckets of r not booked yet, or nil.
func (r *reservation) deferred() []bucket {
	var rest []bucket
	for i, b := range r.booked {
		if b == 0 {
			rest = append(rest, r.buckets[i])
		}
	}
	return rest
}
