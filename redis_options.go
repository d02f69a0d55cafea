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
// Transport never closes rdb: its owner does. A nil rdb is a configuration
// error.
//
// Every Redis call is bounded by [WithRedisTimeout]; while Redis fails or
// times out the Transport runs in its outage mode ([WithOutageMode]; by
// default local buckets at this replica's share of each rule) and returns
// to the shared buckets once Redis answers again (docs/OUTAGES.md).
// [Transport.Mode] and [WithOnModeChange] tell which mode it is in.
//
// Without WithRedis the Transport keeps its buckets in this process.
func WithRedis(rdb redis.UniversalClient) Option {
	return optionFunc(func(c *config) {
		if rdb == nil {
			c.errs = append(c.errs, &OptionError{Option: "WithRedis", Reason: "needs a Redis client, got nil"})
			return
		}
		c.redis.rdb = rdb
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
			c.errs = append(c.errs, &OptionError{Option: "WithNamespace", Reason: fmt.Sprintf("%q must be non-empty and contain no '{' or '}'", ns)})
			return
		}
		c.redis.namespace = ns
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
		c.redis.tagPerKey = true
	})
}

// redisSettings is what the Redis options set.
type redisSettings struct {
	rdb       redis.UniversalClient
	namespace string
	tagPerKey bool
	// outage is what the outage options set (fallback_options.go).
	outage outageSettings
	// nowMicros, when set (tests only), is the Redis scripts' now instead
	// of Redis's TIME (redisstore.Options.NowMicros).
	nowMicros func() int64
}
