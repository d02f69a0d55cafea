package throttle

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/throttlekit/throttle/header"
)

// Defaults of the retry policy.
const (
	// defaultMaxAttempts is how many times a request is sent at most,
	// the first time included (RetryPolicy.MaxAttempts).
	defaultMaxAttempts = 3

	// defaultMaxRetryElapsed bounds the time spent on retries of one
	// request, waits included (RetryPolicy.MaxElapsed).
	defaultMaxRetryElapsed = time.Minute

	// maxDrain bounds what is read from a rejected response before it is
	// closed: enough to let the connection be reused after a short error
	// body, and no more.
	maxDrain = 4 << 10
)

// RetryPolicy says which rate-limited responses are retried and when. Every
// retry waits for a fresh slot in the request's buckets, so retries of a
// fleet stay within its limits too. Only responses are retried: an error
// from the base transport is returned as it is.
//
// The zero RetryPolicy retries with the defaults: see each field. A
// RetryPolicy is a value, copied by [WithRetry]; its functions are called
// from the goroutines of concurrent requests, so they must be safe for
// concurrent use, and must not modify the request or the response (nor
// read or close its body).
type RetryPolicy struct {
	// MaxAttempts is how many times a request is sent at most, the first
	// time included. If MaxAttempts ≤ 0, 3; 1 disables retries.
	MaxAttempts int

	// MaxElapsed bounds the time from the first attempt until the last
	// retry is sent. If MaxElapsed ≤ 0, one minute.
	MaxElapsed time.Duration

	// Replayable reports whether a request may be sent again. If nil, a
	// request may be sent again when it is safe to: its body can be
	// replayed (it has none, or GetBody is set), and its method is
	// idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE: RFC 9110
	// §9.2.2) or it carries an Idempotency-Key header, as Stripe and the
	// IETF draft on idempotency keys use. A request whose body cannot be
	// replayed is never sent again, whatever Replayable says.
	Replayable func(*http.Request) bool

	// ShouldRetry reports whether a response calls for a retry, given
	// what its headers say (see [header.Parse]). If nil, a response is
	// retried when it was rejected for rate and the server did not forbid
	// a retry: s.Limited && s.ShouldRetry != header.RetryHintDoNotRetry.
	ShouldRetry func(*http.Response, header.Signal) bool

	// NewBackOff makes the schedule of waits used when the server names no
	// wait, one per request. If nil, an exponential backoff with jitter
	// starting at 500ms, growing 2× to at most 30s, with ±50 % jitter.
	NewBackOff func() backoff.BackOff
}

// WithRetry sets the retry policy for rate-limited responses. Without it,
// the zero [RetryPolicy] applies (defaults described there). Use
// WithRetry(RetryPolicy{MaxAttempts: 1}) to disable retries. The policy is
// copied; its functions must be safe for concurrent use.
func WithRetry(p RetryPolicy) Option {
	return optionFunc(func(c *config) { c.retry = p })
}

// replayable reports whether r can be sent again safely: the default of
// RetryPolicy.Replayable.
func replayable(r *http.Request) bool {
	if !bodyReplayable(r) {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.Header.Get("Idempotency-Key") != ""
}

// bodyReplayable reports whether r's body can be sent again: it has none,
// or GetBody makes a fresh one.
func bodyReplayable(r *http.Request) bool {
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// retryRateLimited reports whether a response was rejected for rate and the
// server did not forbid a retry: the default of RetryPolicy.ShouldRetry.
func retryRateLimited(_ *http.Response, s header.Signal) bool {
	return s.Limited && s.ShouldRetry != header.RetryHintDoNotRetry
}

// withDefaults returns p with every unset field set to its default.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = defaultMaxRetryElapsed
	}
	if p.Replayable == nil {
		p.Replayable = replayable
	}
	if p.ShouldRetry == nil {
		p.ShouldRetry = retryRateLimited
	}
	if p.NewBackOff == nil {
		p.NewBackOff = defaultBackOff
	}
	return p
}

func defaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0 // RetryPolicy.MaxElapsed bounds the elapsed time
	b.Reset()
	return b
}

// freeConn frees the connection of a response that may be retried, when its
// body is short: the body is read into memory (up to maxDrain bytes) and
// the original closed. A longer body is left as it is. Either way the
// response still reads the same, so it can be returned untouched if no
// retry happens.
func freeConn(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxDrain+1))
	if err != nil || len(buf) > maxDrain {
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
		return
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }

// drainAndClose reads a little of a response body and closes it, so that
// its connection can be reused.
func drainAndClose(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}
