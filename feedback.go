package throttle

import (
	"context"
	"net/http"
	"time"
)

// WithDialects adds provider dialects to the standard header parsers that
// read every response (see [ParseSignal]). The providers package has
// dialects for common APIs.
func WithDialects(ds ...Dialect) Option {
	return optionFunc(func(c *config) { c.dialects = append(c.dialects, ds...) })
}

// WithMaxRetryAfter caps every wait read from a response: a server asking
// for longer pauses its buckets, and delays a retry, by d only. If d ≤ 0,
// [DefaultMaxRetryAfter] applies.
func WithMaxRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxRetryAfter = d })
}

// listen reads what a response says about the server's limits and acts on
// it for the whole fleet: a response that names a time to come back, or
// reports a quota exhausted until its reset, pauses every bucket of the
// request until then, in the store, so that every replica holds back; and
// the waiters of this process that booked their slots before the pause
// book again after it (waitQueue.hold). With the Redis store the pause's
// end is kept in the buckets too, and every replica that books them before
// it ends learns of it and holds its own waiters alike (reservation.held);
// a waiter of a replica that books nothing in the meantime still goes.
func (t *Transport) listen(ctx context.Context, bs []bucket, resp *http.Response) Signal {
	sig := ParseSignal(resp.StatusCode, resp.Header, t.clock.Now(), t.maxRetryAfter, t.dialects...)
	if len(bs) == 0 || t.noFeedback {
		return sig
	}
	if wait, ok := pauseFor(sig); ok && wait > 0 {
		// The pause must land even if the caller gave up meanwhile: the
		// server's answer concerns the whole fleet, not this request.
		// Its end here is reckoned from before the store's call, so that
		// it comes no later than the store's: a slot booked after the
		// pause is not held back (waitQueue.heldLocked allows the
		// lateness tolerance for the rest).
		now := t.clock.Now()
		_ = t.store.pause(context.WithoutCancel(ctx), bs, wait)
		t.queue.hold(bs, now, now.Add(wait))
	}
	if f := t.lifts.filter(bs, feedbackFor(sig, bs), t.clock.Now()); !f.empty() {
		_ = t.store.adapt(context.WithoutCancel(ctx), bs, f)
	}
	return sig
}

// pauseFor returns the pause sig asks for: its [Signal.Wait], except when a
// successful response (no rejection, no Retry-After) reports a quota
// exhausted until a reset of a second or less. A reset comes in whole
// seconds, so such a report means "a slot frees within the second", which
// a strict sliding window says on every response near its limit; pausing
// the fleet for it would cost up to a second of the quota each time.
// feedbackFor cuts the rate instead, and if the next request is rejected,
// the rejection's own Retry-After pauses the fleet.
func pauseFor(sig Signal) (time.Duration, bool) {
	wait, ok := sig.Wait()
	if !ok || (!sig.Limited && !sig.HasRetryAfter && wait <= minSpreadReset) {
		return 0, false
	}
	return wait, true
}
