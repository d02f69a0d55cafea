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
// request until then, in the store, so that every replica holds back.
func (t *Transport) listen(ctx context.Context, bs []bucket, resp *http.Response) Signal {
	sig := ParseSignal(resp.StatusCode, resp.Header, t.clock.Now(), t.maxRetryAfter, t.dialects...)
	if len(bs) == 0 {
		return sig
	}
	if wait, ok := sig.Wait(); ok && wait > 0 {
		// The pause must land even if the caller gave up meanwhile: the
		// server's answer concerns the whole fleet, not this request.
		_ = t.store.pause(context.WithoutCancel(ctx), bs, wait)
	}
	if f := feedbackFor(sig, bs); !f.empty() {
		_ = t.store.adapt(context.WithoutCancel(ctx), bs, f)
	}
	return sig
}
