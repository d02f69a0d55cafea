package throttle

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// The concurrency caps of [Rule.Concurrency]: a request takes a lease in
// each cap it meets once its rate slots have come, all or none, and gives
// them back when its response body is closed or read to its end
// (leasebody.go), or when it fails. Leases come after the rate slots so
// that a request never holds a lease while it waits for its rate: a
// request of a slow sender (Twilio's long codes, 1 message/s) would
// otherwise keep the account's leases from the requests that could go.
// A request that waited for its leases longer than its buckets' lateness
// tolerance books its rate slots again before it leaves (its first slots
// are lost capacity): leaving that late on its first slots, with others
// released at the same moment, would send a burst its buckets never
// allowed.

// anyConcurrency reports whether a rule of rs has a concurrency cap.
func anyConcurrency(rs []*compiledRule) bool {
	for _, c := range rs {
		if c.Concurrency > 0 {
			return true
		}
	}
	return false
}

// newLeaseStore returns the lease store of a Transport configured by cfg,
// and the function that closes it: in this process, or, with WithRedis,
// shared through Redis (rs is the Redis store of the rate buckets, whose
// heartbeat counts the live replicas) with a local fallback sized to this
// replica's share of each cap while Redis is down.
func newLeaseStore(cfg *config, rs *redisstore.Store) (lease.Store, func() error) {
	if cfg.redis.rdb == nil {
		return lease.NewLocal(lease.WithClock(cfg.clock)), func() error { return nil }
	}
	opts := []lease.RedisOption{lease.WithNamespace(cfg.redis.namespace)}
	if cfg.leaseTTL > 0 {
		opts = append(opts, lease.WithTTL(cfg.leaseTTL))
	}
	if d := cfg.redis.outage.timeout; d > 0 {
		opts = append(opts, lease.WithCallTimeout(d))
	}
	r := lease.NewRedis(cfg.redis.rdb, opts...)
	live := func() int { return int(rs.FleetSize()) }
	var fopts []lease.FallbackOption
	if share := cfg.redis.outage.share; share > 0 {
		// WithFleetShare's fraction, as a fleet size: the local share of
		// a cap is then ceil(Limit × fraction) until a count arrives.
		fopts = append(fopts, lease.WithFleetSize(max(1, int(1/share))))
	} else {
		fopts = append(fopts, lease.WithFleetSize(store.DefaultFleetSize))
	}
	return lease.NewFallback(r, live, fopts...), r.Close
}

// Close stops the Transport's background work, if it has any: with
// [WithRedis], the subscription to the pauses of the fleet (a pub/sub
// connection the first request opens, see [WithRedis]); with a rule that
// has a Concurrency too, the lease store's renewals and its pub/sub
// connection (the leases still held then expire after their TTL, see
// [WithLeaseTTL]). It does not close the Redis client, nor the
// base transport's connections (see [Transport.CloseIdleConnections]).
// Requests made after Close that need a lease fail. Close is safe for
// concurrent use and idempotent; it returns nil on the zero Transport.
func (t *Transport) Close() error {
	t.pauses.close()
	if t.closeLeases == nil {
		return nil
	}
	return t.closeLeases()
}

// WithLeaseTTL sets how long a concurrency lease (see [Rule.Concurrency])
// lives in Redis unrenewed: a replica renews its leases every third of it,
// and the leases of a replica that crashed free their slots after it. If
// d ≤ 0 or the option is not given, 10 seconds: long enough that a replica
// stalled for seconds keeps its leases, short enough that a crash costs a
// fleet its slots for seconds, not minutes. It has no effect without
// [WithRedis] (the leases of one process cannot outlive it).
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.leaseTTL = d })
}

// caps returns the concurrency caps request r needs: one per matching rule
// with a Concurrency, keyed as the rule's buckets are (the rule's name and
// the hashed partition key).
func (t *Transport) caps(r *http.Request) []lease.Cap {
	var cs []lease.Cap
	for _, c := range t.rules {
		if c.Concurrency == 0 || !c.Match.Matches(r) {
			continue
		}
		cs = append(cs, lease.Cap{Key: c.bucketKey(r), Rule: c.Name, Limit: c.Concurrency})
	}
	return cs
}

// takeLeases takes a lease in every cap of cs, waiting as long as the
// request's budget allows, and returns the function that gives them back,
// and the request's booking (bk, or a new one, see the top of this file).
// A request that books no rate bucket (bs empty) beats the Redis store's
// heartbeat itself, so that the fallback's shares count this replica.
func (t *Transport) takeLeases(ctx context.Context, cs []lease.Cap, bs []store.Bucket, bk feedback.Booking) (func(), feedback.Booking, error) {
	if len(bs) == 0 && t.beat != nil {
		// A failed beat costs only the count's freshness.
		_ = t.beat(ctx)
	}
	budget, reason := t.budget(ctx)
	start := t.clock.Now()
	l, err := t.leases.Acquire(ctx, cs, lease.Priority(PriorityOf(ctx)), budget)
	waited := t.clock.Now().Sub(start)
	if err != nil {
		return nil, bk, leaseError(err, budget, reason, waited)
	}
	if len(bs) > 0 && waited > lateness(bs) {
		if bk, err = t.acquire(ctx, bs); err != nil {
			l.Release()
			return nil, bk, err
		}
	}
	return t.observeLease(ctx, cs, l, start, waited), bk, nil
}

// leaseError turns the lease store's error into the Transport's: a wait
// that ran out of budget is a [*WaitError] (whose Wait is how long the
// request waited, as a lease's wait is not known in advance); a context's
// end is the context's error.
func leaseError(err error, budget time.Duration, reason error, waited time.Duration) error {
	var te *lease.TimeoutError
	if errors.As(err, &te) {
		return &WaitError{Rule: te.Rule, Wait: max(waited, budget), Budget: budget, Err: reason}
	}
	return err
}

// leaseAdapter is the part of a lease store that adapts its caps to the
// server (internal/lease's Redis and Fallback stores).
type leaseAdapter interface {
	Lower(ctx context.Context, c lease.Cap) (int, error)
	Observe(ctx context.Context, c lease.Cap, serverCount int) (int, error)
}

// adaptLeases tells the lease store what a response of a request holding
// leases in cs says of the server's concurrency limit: a rejection for too
// many requests in flight lowers every cap of cs for the fleet; the
// server's count of requests in flight (Twilio-Concurrent-Requests) keeps
// the caps in line with it, the requests beyond the fleet's own being
// someone else's use of the account.
func (t *Transport) adaptLeases(ctx context.Context, cs []lease.Cap, sig header.Signal) {
	a, ok := t.leases.(leaseAdapter)
	if !ok || t.noFeedback || (!sig.Concurrent && !sig.HasInFlight) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, c := range cs {
		// A failed call leaves the cap as it was: the next answer tries
		// again.
		if sig.Limited && sig.Concurrent {
			_, _ = a.Lower(ctx, c)
		} else if sig.HasInFlight {
			_, _ = a.Observe(ctx, c, int(min(sig.InFlight, int64(maxConcurrency))))
		}
	}
}

// noLeases is the release of a request that holds none.
func noLeases() {}
