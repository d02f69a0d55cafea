package throttle

import (
	"context"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/throttlekit/throttle/header"
)

// This file is the Transport's reading of when to come back: the cap on
// every wait a server names, and the delay chosen before a retry. Package
// header reads what a response says; feedback.go and internal/feedback decide
// what the fleet's buckets do with it (a pause, a capped rate).

// WithMaxRetryAfter caps every wait read from a response: a server asking
// for longer pauses its buckets, and delays a retry, by d only. If d ≤ 0,
// [header.DefaultMaxRetryAfter] (2 min), which is also the cap without
// WithMaxRetryAfter.
func WithMaxRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxRetryAfter = d })
}

// signal reads what resp, received at now, says about the server's limits, through the
// Transport's dialects, with every wait in it (RetryAfter and every
// quota's Reset) capped at the Transport's MaxRetryAfter: whatever the
// server asks, no pause and no retry of this Transport waits longer.
func (t *Transport) signal(resp *http.Response, now time.Time) header.Signal {
	return header.Parse(resp.StatusCode, resp.Header, now, t.maxRetryAfterCap(), t.dialects...)
}

// maxRetryAfterCap is the cap on waits read from responses: the
// Transport's MaxRetryAfter, or header.DefaultMaxRetryAfter when unset.
func (t *Transport) maxRetryAfterCap() time.Duration {
	if t.maxRetryAfter <= 0 {
		return header.DefaultMaxRetryAfter
	}
	return t.maxRetryAfter
}

// retryDelay returns how long to wait before retrying a request first sent
// at start whose response said sig: the wait the server named (a
// Retry-After, else the reset of a quota it reported spent, see
// [header.Signal.Wait]), already capped at MaxRetryAfter; else the next
// wait of the request's backoff schedule bo. It returns false when no retry
// is to be made: the backoff gave up, or the retry would be sent after the
// policy's MaxElapsed or past the context's deadline, where a retry could
// only fail.
func (t *Transport) retryDelay(ctx context.Context, sig header.Signal, bo *backoffState, start time.Time) (time.Duration, bool) {
	delay, ok := sig.Wait()
	if !ok {
		delay = bo.next(t.retry.NewBackOff)
		if delay == backoff.Stop {
			return 0, false
		}
	}
	at := t.clock.Now().Add(delay)
	if at.Sub(start) > t.retry.MaxElapsed || beyondDeadline(ctx, at) {
		return 0, false
	}
	return delay, true
}

// beyondDeadline reports whether at lies past ctx's deadline.
func beyondDeadline(ctx context.Context, at time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && at.After(dl)
}

// backoffState makes a request's backoff schedule on first use.
type backoffState struct{ b backoff.BackOff }

func (s *backoffState) next(newBackOff func() backoff.BackOff) time.Duration {
	if s.b == nil {
		s.b = newBackOff()
	}
	return s.b.NextBackOff()
}
