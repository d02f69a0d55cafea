package throttle

import (
	"context"
	"net/http"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/store"
)

// WithDialects adds provider dialects to the standard header parsers that
// read every response (see [header.Parse]). The providers package has
// dialects for common APIs. Without WithDialects (and for nil dialects,
// which are skipped) only the standard headers are read. A Dialect is
// called from the goroutines of concurrent requests, so it must be safe
// for concurrent use.
func WithDialects(ds ...header.Dialect) Option {
	return optionFunc(func(c *config) { c.dialects = append(c.dialects, ds...) })
}

// listen reads what a response says about the server's limits and acts on
// it for the whole fleet (see internal/feedback): a response that names a time
// to come back, a rejection that names none, or a fixed window reported
// exhausted until its reset, pauses every bucket of the request, in the
// store, so that every replica holds back; and the waiters of this process
// that booked their slots before the pause book again after it
// (waitQueue.hold). With the Redis store the pause's end is kept in the
// buckets too, and every replica that books them before it ends learns of
// it and holds its own waiters alike (store.Reservation.Held). A response that
// reports what remains of a quota, or a rejection, may cap a bucket's rate
// at what the server leaves the fleet (store.Store.Limit). It returns the signal
// and the time it read it at, the clock's one reading for the response.
//
// A rejection for too many requests in flight (header.Signal.Concurrent)
// of a request that holds leases is the concurrency caps' to act on
// (adaptLeases), not the rates': the rate buckets do not hear of it.
func (t *Transport) listen(ctx context.Context, bs []store.Bucket, bk feedback.Booking, resp *http.Response, leased bool) (header.Signal, time.Time) {
	now := t.clock.Now()
	sig := t.signal(resp, now)
	t.observeResponse(ctx, bs, resp, sig, now)
	if len(bs) == 0 || t.noFeedback || (leased && sig.Limited && sig.Concurrent) {
		return sig, now
	}
	t.learnAnchors(bs, resp, now)
	act := t.views.Read(bs, bk, sig, now.UnixNano())
	t.observeQuota(ctx, bs, bk, sig, now)
	if act.Pause == 0 && len(act.Caps) == 0 {
		// Nearly every response: nothing for the store.
		return sig, now
	}
	// The store calls must land even if the caller gave up meanwhile:
	// the server's answer concerns the whole fleet, not this request.
	ctx = context.WithoutCancel(ctx)
	if act.Pause > 0 {
		// The pause's end here is reckoned from before the store's call,
		// so that it comes no later than the store's: a slot booked after
		// the pause is not held back (waitQueue.heldLocked allows the
		// lateness tolerance for the rest).
		_ = t.store.Pause(ctx, bs, act.Pause)
		t.queue.hold(bs, now, now.Add(act.Pause))
		t.views.Paused(bs, now.Add(act.Pause).UnixNano(), now.UnixNano())
		t.observePause(ctx, bs, act.Pause, now)
	}
	for _, c := range act.Caps {
		// A failed call leaves the bucket to its rule, or to the cap in
		// force: the next reading tries again.
		before := t.clock.Now()
		if st, err := t.store.Limit(ctx, bs[c.Bucket], c.Cap); err == nil && st.Moves() {
			// The store's now lies within the call: half its round trip
			// is the unbiased guess, as for a reservation's wait.
			after := t.clock.Now()
			from := before.Add(after.Sub(before)/2 + st.From)
			t.queue.stretch([]string{bs[c.Bucket].Key}, st, from.UnixNano(), after.UnixNano())
		}
		t.observeCap(ctx, bs[c.Bucket], c.Cap, sig, now)
	}
	return sig, now
}

// heardStretch re-times this process's waiters in keys as another
// replica's cut stretched the slots they hold (store.Stretch, published
// by redisstore.Store.Limit). The stretch is taken to start from at the
// message's arrival, late by its latency (a little less is stretched);
// a waiter this process booked within that latency after the cut is
// stretched too, though booked under the cap (it leaves a little later
// than it might). Both are well under a millisecond on a local network.
func (t *Transport) heardStretch(keys []string, from time.Duration, ratio float64) {
	now := t.clock.Now()
	t.queue.stretch(keys, store.Stretch{From: from, Ratio: ratio}, now.Add(from).UnixNano(), now.UnixNano())
}

// heardPause holds this process's waiters in keys for d: a pause another
// replica (or this one) was told of and published (see
// redisstore.Store.Watch). Without it, a replica whose waiters all
// sleep on slots booked before the pause learns of it only when one of them
// books again, after sending its request into the server's rejection; and
// the rejection's whole-second wait, rounded up from later in the pause,
// then held the fleet past its end. d is capped as a wait read from a
// response is.
func (t *Transport) heardPause(keys []string, d time.Duration) {
	d = min(d, t.maxRetryAfterCap())
	now := t.clock.Now()
	until := now.Add(d)
	if held := t.queue.holdWaiting(keys, until); len(held) > 0 {
		t.views.Paused(held, until.UnixNano(), now.UnixNano())
	}
}
