package store

import (
	"context"
	"errors"
	"sync"
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
	// answered holds the names of the calls (see For) Redis has answered.
	answered sync.Map
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

// The names of the calls that run a script of their own, for For and
// Answered: the Redis store's names of them (its errors say "throttle:
// redis <name>"), so that the outage store, which marks them answered, and
// the Redis store, which bounds them too, read one bound.
const (
	CallRefund = "refund"
	CallPause  = "pause"
	CallLimit  = "limit"
	CallHold   = "hold"
	CallCharge = "charge"
	CallQuota  = "quota"
)

// For returns the bound of the next call named call, one that runs a
// script of its own (the feedback's limit, a pause, a refund, ...): d once
// Redis has answered such a call, ColdTimeout if longer until then. The
// first run of a script on a Redis pays for loading it (EVALSHA answered
// NOSCRIPT, then EVAL: two round trips and a compile), which a warm
// connection does not spare it. Measured: the first limit call of each of
// an 8 × 16 fleet's replicas, 0.1 s into its run on a loaded two-core
// machine, took over 50 ms where its reservations took 20-70 ms, and sent
// every replica to its fallback for 250 ms (2026-12-06, the feedback
// matrix's 8x16_fixed-60s cells: 0.90-1.07 of the quota in 5 s beside
// 1.096-1.099 without the trip).
func (t *Timeout) For(call string) time.Duration {
	if t.warm.Load() {
		if _, ok := t.answered.Load(call); ok {
			return t.d
		}
	}
	return max(t.d, ColdTimeout)
}

// Answered records that Redis has answered a call named call (see For).
func (t *Timeout) Answered(call string) {
	t.warm.Store(true)
	if _, ok := t.answered.Load(call); !ok {
		t.answered.Store(call, struct{}{})
	}
}

// BoundContext returns ctx bounded by timeout, its end marked as
// ErrTimeout (the outage store's timedOut tells it from other ends).
func BoundContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, ErrTimeout)
}
