package middleware

import (
	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// defaultNamespace is the namespace of a Limiter's Redis keys without
// WithNamespace: apart from a Transport's default.
const defaultNamespace = "middleware"

// newRedisStore returns the store of a Limiter given WithRedis: the Redis
// store with this replica's heartbeat (whose count sizes the fallback),
// inside the outage store that bounds its calls and takes over while
// Redis is unreachable, wired as the Transport wires them.
func newRedisStore(cfg *config, c throttle.Clock) (*outage.Store, *redisstore.Store) {
	ns := cfg.namespace
	if ns == "" {
		ns = defaultNamespace
	}
	timeout := store.NewTimeout(cfg.timeout)
	if cfg.timeout <= 0 {
		timeout = store.NewTimeout(outage.DefaultTimeout)
	}
	guard := !honoursDeadlines(cfg.rdb)
	rs := redisstore.New(cfg.rdb, redisstore.Options{Namespace: ns, TagPerKey: cfg.tagPerKey, Beat: c, Timeout: timeout, Guard: guard})
	mode := cfg.mode
	if mode == throttle.ModeLocal {
		mode = throttle.ModeFallback
	}
	return outage.New(rs, c, outage.Options{
		Mode:        outage.Mode(mode),
		Share:       cfg.share,
		Timeout:     timeout,
		Fleet:       rs.FleetSize,
		Guard:       guard,
		ReserveKept: !rs.Split(),
	}), rs
}

// newLeaseStore returns the fleet-wide concurrency caps of a Limiter given
// WithRedis, as the Transport builds them (the root's concurrency.go):
// leases in Redis under the Limiter's namespace, inside the fallback that
// runs this replica's share of each cap while Redis is unreachable; and
// its Close.
func newLeaseStore(cfg *config, rs *redisstore.Store) (lease.Store, func() error) {
	ns := cfg.namespace
	if ns == "" {
		ns = defaultNamespace
	}
	opts := []lease.RedisOption{lease.WithNamespace(ns)}
	if cfg.timeout > 0 {
		opts = append(opts, lease.WithCallTimeout(cfg.timeout))
	}
	r := lease.NewRedis(cfg.rdb, opts...)
	live := func() int { return int(rs.FleetSize()) }
	size := store.DefaultFleetSize
	if cfg.share > 0 {
		size = max(1, int(1/cfg.share))
	}
	return lease.NewFallback(r, live, lease.WithFleetSize(size)), r.Close
}

// honoursDeadlines reports whether rdb applies context deadlines to its
// socket reads (go-redis's ContextTimeoutEnabled).
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}
