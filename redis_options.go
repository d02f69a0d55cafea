package throttle

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultNamespace is the namespace of a Transport given [WithRedis] but no
// [WithNamespace]. Fleets that share a Redis must each set their own.
const DefaultNamespace = "default"

// WithRedis makes the Transport keep its buckets in Redis, shared by every
// Transport (in any process) that uses the same Redis and namespace: a
// fleet of replicas together keeps each rule's limit. Each request costs one
// atomic Lua call, timed by Redis's clock, whatever the number of rules it
// matches (see docs/REDIS.md for the exceptions with [WithHashTagPerKey]).
//
// rdb may be a single node, Sentinel or Cluster client (any
// [redis.UniversalClient]); Redis 6.0 or later is needed (7 is tested). The
// Transport never closes rdb: its owner does. Redis errors are returned by
// RoundTrip, wrapped. A nil rdb is a configuration error.
//
// Without WithRedis the Transport keeps its buckets in this process.
func WithRedis(rdb redis.UniversalClient) Option {
	return optionFunc(func(c *config) {
		if rdb == nil {
			c.errs = append(c.errs, fmt.Errorf("throttle: WithRedis(nil): need a Redis client"))
			return
		}
		addRedisSetting(c, func(s *redisSettings) { s.rdb = rdb })
	})
}

// WithNamespace sets the namespace of the Transport's Redis keys, so that
// separate fleets or environments sharing one Redis never share a bucket:
// keys are "throttle:{namespace}:...". Transports that must share their
// buckets must use the same namespace (and the same rules). The default is
// [DefaultNamespace]. A namespace must be non-empty and must not contain
// '{' or '}' (it is the Redis Cluster hash tag); an invalid one is a
// configuration error naming it. Without [WithRedis] it has no effect.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) {
		if ns == "" || strings.ContainsAny(ns, "{}") {
			c.errs = append(c.errs, fmt.Errorf("throttle: WithNamespace(%q): must be non-empty and contain no '{' or '}'", ns))
			return
		}
		addRedisSetting(c, func(s *redisSettings) { s.namespace = ns })
	})
}

// WithHashTagPerKey spreads the buckets of partitioned rules (rules with a
// [Rule.Key]) over the masters of a Redis Cluster by putting the hashed
// partition key into each key's hash tag: "throttle:p:{namespace:hash}:rule".
// Buckets of rules without a Key keep the namespace's tag. By default every
// key of a namespace shares one tag, so one master serves a whole fleet.
//
// On a Cluster a request whose buckets then fall under different tags costs
// one script call per tag, and the all-or-nothing guarantee weakens as
// docs/REDIS.md describes: every bucket is booked at the request's one
// departure time or the request is rejected, but other requests may see the
// bookings of one group before the next is made, and a rollback that finds
// later bookings behind it leaves that slot spent. On a single node or
// Sentinel every request still costs one call.
//
// Every Transport sharing a namespace must agree on this option: it changes
// the keys. Without [WithRedis] it has no effect.
func WithHashTagPerKey() Option {
	return optionFunc(func(c *config) {
		addRedisSetting(c, func(s *redisSettings) { s.tagPerKey = true })
	})
}

// redisSettings is what the Redis options set.
type redisSettings struct {
	rdb       redis.UniversalClient
	namespace string
	tagPerKey bool
}

// settingsCarrier hands the settings collected so far from one Redis
// option's store constructor to the next. It is never used as a store.
type settingsCarrier struct {
	store
	settings redisSettings
}

// addRedisSetting records a Redis setting in c. The options reach the
// config only through config.newStore, so each Redis option wraps the
// constructor set before it: when the Transport calls the outermost one, it
// asks the inner ones (through a copy of the config whose newStore is nil,
// which marks the call as collecting) for the settings they hold, adds its
// own and builds the store. The options thus combine in any order. Without
// a client (no WithRedis) the store stays local.
func addRedisSetting(c *config, set func(*redisSettings)) {
	prev := c.newStore
	c.newStore = func(cfg *config) (store, error) {
		st := redisSettings{namespace: DefaultNamespace}
		if prev != nil {
			inner := *cfg
			inner.newStore = nil
			s, err := prev(&inner)
			if err != nil {
				return nil, err
			}
			if sc, ok := s.(*settingsCarrier); ok {
				st = sc.settings
			}
		}
		set(&st)
		if cfg.newStore == nil {
			return &settingsCarrier{settings: st}, nil
		}
		if st.rdb == nil {
			return newLocalStore(cfg.clock), nil
		}
		if err := checkRedisRules(cfg.rules, cfg.headroom); err != nil {
			return nil, err
		}
		return newRedisStore(st), nil
	}
}
