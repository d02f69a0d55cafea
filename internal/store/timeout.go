package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// DefaultFleetSize is the fleet size the outage store assumes before the
// heartbeat has counted the live replicas, and the count the heartbeat must
// reach at its first beat to be believed at once. The root package exports
// it (see its doc there).
const DefaultFleetSize = 10

const (
	// ColdTimeout bounds the Redis calls of a Transport until Redis has
	// answered one (when it exceeds the Redis timeout): the first calls
	// dial, shake hands with TLS and load the scripts, which on a loaded
	// machine takes longer than a healthy call's timeout, and sending a
	// starting fleet to its fallback for that would spend each replica's
	// local burst on top of the shared bucket. An unreachable Redis still
	// fails at once (connection refused); only a Redis that accepts
	// connections but does not answer holds a starting replica's first
	// requests up to this long.
	ColdTimeout = time.Second
)

// ErrTimeout reports a Redis call that did not answer within the
// timeout (see WithRedisTimeout).
var ErrTimeout = errors.New("throttle: redis call timed out")

// Timeout is the bound of a Transport's Redis calls: WithRedisTimeout's
// d, or ColdTimeout if longer until Redis has answered a call (the first
// calls dial, maybe shake hands (TLS) and load the scripts, and their
// latency says nothing about Redis's health). The outage store and the
// Redis store it wraps share one. It is safe for concurrent use.
type Timeout struct {
	d    time.Duration
	warm atomic.Bool // Redis has answered a call
}

// NewTimeout returns the bound d of a Transport's Redis calls, cold (see
// Timeout) until MarkWarm.
func NewTimeout(d time.Duration) *Timeout { return &Timeout{d: d} }

// Warm returns the bound once Redis has answered a call: d.
func (t *Timeout) Warm() time.Duration { return t.d }

// MarkWarm records that Redis has answered a call: from now on the bound
// is d alone.
func (t *Timeout) MarkWarm() { t.warm.Store(true) }

// Next returns the bound of the Next Redis call.
func (t *Timeout) Next() time.Duration {
	if t.warm.Load() {
		return t.d
	}
	return max(t.d, ColdTimeout)
}

// BoundContext returns ctx bounded by timeout, its end marked as
// ErrTimeout (the outage store's timedOut tells it from other ends).
func BoundContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, ErrTimeout)
}
