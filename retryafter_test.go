package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

// TestTransportSignalCapsWaits checks that every wait a response names is
// cut to the Transport's MaxRetryAfter, or to header.DefaultMaxRetryAfter
// without one, before any pause or retry can use it.
func TestTransportSignalCapsWaits(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{
		"Retry-After":           {"3600"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"7200"},
	}}
	for _, tt := range []struct {
		name         string
		opt          time.Duration
		retry, reset time.Duration
		capped       bool
	}{
		{"unset", 0, header.DefaultMaxRetryAfter, header.DefaultMaxRetryAfter, true},
		{"negative", -time.Second, header.DefaultMaxRetryAfter, header.DefaultMaxRetryAfter, true},
		{"set", 5 * time.Second, 5 * time.Second, 5 * time.Second, true},
		{"between the two waits", 90 * time.Minute, time.Hour, 90 * time.Minute, true},
		{"above both waits", 3 * time.Hour, time.Hour, 2 * time.Hour, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := retryTransport(t, nil, WithMaxRetryAfter(tt.opt))
			sig := tr.signal(resp, tr.clock.Now())
			q, _ := sig.Quota("requests")
			if !sig.Limited || sig.RetryAfter != tt.retry || q.Reset != tt.reset || sig.Capped != tt.capped {
				t.Fatalf("got %v; want RetryAfter %v, reset %v, capped %v", sig, tt.retry, tt.reset, tt.capped)
			}
		})
	}
}

// TestTransportSignalDialects checks that the Transport's dialects read
// every response, after the standard fields.
func TestTransportSignalDialects(t *testing.T) {
	tr := retryTransport(t, nil, WithDialects(header.DialectFunc(func(status int, _ http.Header, _ time.Time, s *header.Signal) {
		s.Limited = status == http.StatusForbidden
		s.RetryAfter, s.HasRetryAfter = time.Hour, true
	})), WithMaxRetryAfter(time.Second))
	sig := tr.signal(&http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}, tr.clock.Now())
	if !sig.Limited || sig.RetryAfter != time.Second || !sig.Capped {
		t.Fatalf("got %+v; want a limited signal with its wait capped at 1s", sig)
	}
}

// constantBackOff is a backoff schedule of one wait, then Stop after n.
type constantBackOff struct {
	d time.Duration
	n int
}

func (b *constantBackOff) NextBackOff() time.Duration {
	if b.n <= 0 {
		return backoff.Stop
	}
	b.n--
	return b.d
}

func (b *constantBackOff) Reset() {}

func TestRetryDelay(t *testing.T) {
	start := time.Unix(1700000000, 0)
	named := header.Signal{Limited: true, RetryAfter: 3 * time.Second, HasRetryAfter: true}
	spent := header.Signal{Limited: true, Quotas: []header.Quota{{Name: "requests", Remaining: 0, HasRemaining: true, Reset: 4 * time.Second, HasReset: true}}}
	bare := header.Signal{Limited: true}
	tests := []struct {
		name     string
		sig      header.Signal
		elapsed  time.Duration // since start, when the response is read
		deadline time.Duration // after start; 0 for none
		backoffs int
		want     time.Duration
		ok       bool
	}{
		{name: "the server's Retry-After", sig: named, want: 3 * time.Second, ok: true},
		{name: "the reset of a spent quota", sig: spent, want: 4 * time.Second, ok: true},
		{name: "no wait named: the backoff", sig: bare, backoffs: 1, want: 500 * time.Millisecond, ok: true},
		{name: "the backoff gave up", sig: bare, backoffs: 0},
		{name: "the wait outlasts MaxElapsed", sig: named, elapsed: 58 * time.Second},
		{name: "within MaxElapsed", sig: named, elapsed: 57 * time.Second, want: 3 * time.Second, ok: true},
		{name: "the wait ends past the deadline", sig: named, deadline: 2 * time.Second},
		{name: "the wait ends before the deadline", sig: named, deadline: 4 * time.Second, want: 3 * time.Second, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New(start)
			tr := retryTransport(t, nil, WithClock(clk), WithRetry(RetryPolicy{
				MaxElapsed: time.Minute,
				NewBackOff: func() backoff.BackOff { return &constantBackOff{d: 500 * time.Millisecond, n: tt.backoffs} },
			}))
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, start.Add(tt.deadline))
				defer cancel()
			}
			clk.Advance(tt.elapsed)
			var bo backoffState
			got, ok := tr.retryDelay(ctx, tt.sig, &bo, start)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("retryDelay = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
