package throttle

// This file is sharing buckets across replicas as users meet it: the
// options of the shared store (WithRedis, WithNamespace, WithHashTagPerKey)
// and of its outages (WithRedisTimeout, WithOutageMode, WithFleetShare,
// WithOnModeChange), and the wiring that builds the Redis store
// (internal/redisstore) inside the outage store (internal/outage) for a
// Transport given WithRedis. The seam both implement is
// internal/store.Store.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// defaultNamespace is the namespace of a Transport given WithRedis but no
// WithNamespace.
const defaultNamespace = "default"

// WithRedis makes the Transport keep its buckets in Redis, shared by every
// Transport (in any process) that uses the same Redis and namespace: a
// fleet of replicas together keeps each rule's limit. Each request costs one
// atomic Lua call, timed by Redis's clock, whatever the number of rules it
// matches (see docs/REDIS.md for the exceptions with [WithHashTagPerKey]).
//
// rdb may be a single node, Sentinel or Cluster client (any
// [redis.UniversalClient]); Redis 6.0 or later is needed (7 is tested). The
// Transport never closes rdb: its owner does. A nil rdb is a configuration
// error. NewTransport loads the Transport's main scripts into Redis (every
// master of a Cluster) on a goroutine that ends within a second: a fleet's
// first requests then book without a script load in their round trip,
// which would make them leave late and together. Redis need not be up
// yet, and an ACL that refuses SCRIPT only leaves the load to the first
// calls.
//
// Every Redis call is bounded by [WithRedisTimeout]; while Redis fails or
// times out the Transport runs in its outage mode ([WithOutageMode]; by
// default local buckets at this replica's share of each rule) and returns
// to the shared buckets once Redis answers again (docs/OUTAGES.md).
// [Transport.Mode] and [WithOnModeChange] tell which mode it is in.
//
// A pause the server asks of one replica (a Retry-After, a 429) reaches the
// others twice: in the buckets, which every replica books, and at once on
// the namespace's pub/sub channel, so that a replica whose waiters sleep on
// slots booked before the pause holds them too instead of sending them into
// the server's rejection. The first request opens that subscription (one
// connection of rdb's, unless [WithoutFeedback]); [Transport.Close] closes
// it.
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
// buckets must use the same namespace (and the same rules). Without
// WithNamespace, "default": fleets that share a Redis must each set their
// own. A namespace must be non-empty and must not contain
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
	// outage is what the outage options set (below).
	outage outageSettings
	// nowMicros, when set (tests only), is the Redis scripts' now instead
	// of Redis's TIME (redisstore.Options.NowMicros).
	nowMicros func() int64
}

// Defaults of the outage options (see docs/OUTAGES.md).
const (
	// defaultRedisTimeout bounds every Redis call (WithRedisTimeout).
	defaultRedisTimeout = 50 * time.Millisecond
)

// WithRedisTimeout bounds every Redis call (reserve, refund, pause, adapt)
// of a Transport given [WithRedis]: a call that has not answered after d
// counts as failed, and the request in hand is served in the outage mode
// at once (see [WithOutageMode]). If d ≤ 0, 50 ms: a Redis on the same
// network answers a script call in well under a millisecond, so 50 ms is
// far above a healthy call's latency and still short enough that a
// request hitting an outage loses little time before it falls back.
// Until Redis has answered the Transport's first call (which dials, and
// loads the scripts), calls are bounded by one second instead if that is
// longer; so is the first call of each script of its own (a pause, the
// feedback's cap, a refund, ...) until one of its kind has answered, since
// its first run loads it. Without WithRedis it has no effect.
func WithRedisTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.redis.outage.timeout = d })
}

// WithOutageMode sets what a Transport given [WithRedis] does while Redis
// is unreachable: [ModeFallback] (the default: local limiters sized to
// this replica's share of the fleet, see [WithFleetShare]; token buckets
// for the leaky and token bucket rules, the rule's own algorithm for the
// window rules), [ModeFailOpen]
// (requests go at once, unthrottled) or [ModeFailClosed] (requests fail
// with an error wrapping [ErrStoreUnavailable]). Any other Mode is a
// configuration error, an [*OptionError]. Without WithRedis it has no
// effect.
func WithOutageMode(m Mode) Option {
	return optionFunc(func(c *config) {
		if m != ModeFallback && m != ModeFailOpen && m != ModeFailClosed {
			c.errs = append(c.errs, &OptionError{Option: "WithOutageMode", Reason: fmt.Sprintf(
				"must be ModeFallback, ModeFailOpen or ModeFailClosed, got %v", m)})
			return
		}
		c.redis.outage.mode = m
	})
}

// WithFleetShare sets this replica's share of every rule in [ModeFallback],
// in (0, 1]: 0.25 for one replica of four. If it is not set, the share is
// one over the number of live replicas the heartbeat counted last, or a
// tenth before the first heartbeat: a replica that starts while Redis is
// down runs each rule at a tenth of its rate, which is conservative for
// fleets of up to ten replicas; larger fleets should set WithFleetShare.
// A value outside
// (0, 1] is a configuration error, an [*OptionError]. Without [WithRedis]
// it has no effect.
func WithFleetShare(fraction float64) Option {
	return optionFunc(func(c *config) {
		if !(fraction > 0 && fraction <= 1) {
			c.errs = append(c.errs, &OptionError{Option: "WithFleetShare", Reason: fmt.Sprintf(
				"must be within (0, 1], got %v", fraction)})
			return
		}
		c.redis.outage.share = fraction
	})
}

// WithOnModeChange registers fn to be told of every change of the
// Transport's [Mode]. fn runs on a goroutine of its own, never under a lock
// of the Transport and never on a request's path, one change at a time in
// the order they happened: a slow fn delays later reports, not requests.
// It may call [Transport.Mode]. If fn is nil (the default), changes are not
// reported. Without [WithRedis] the mode never changes.
func WithOnModeChange(fn func(ModeChange)) Option {
	return optionFunc(func(c *config) { c.redis.outage.onChange = fn })
}

// outageSettings is what the outage options set. The zero value means the
// defaults: withDefaults fills them in.
type outageSettings struct {
	timeout  time.Duration
	mode     Mode
	share    float64 // explicit share of each rule in ModeFallback; 0 means counted
	onChange func(ModeChange)
}

func defaultOutageSettings() outageSettings {
	return outageSettings{timeout: defaultRedisTimeout, mode: ModeFallback}
}

// newRedisOutageStore returns the store of a Transport given WithRedis: the
// Redis store, with this replica's heartbeat (whose count sizes the
// fallback), wrapped in the outage store that bounds its calls and takes
// over while Redis is unreachable (docs/OUTAGES.md). It checks first that
// the Redis store can run cfg's rules.
func newRedisOutageStore(cfg *config) (*outage.Store, *redisstore.Store, error) {
	if err := checkRedisRules(cfg.rules, cfg.headroom); err != nil {
		return nil, nil, err
	}
	os, rs := redisOutageStore(cfg.redis, cfg.clock, cfg.onStoreCall)
	return os, rs, nil
}

// redisOutageStore builds the outage store over a new Redis store set by
// st, and returns both.
func redisOutageStore(st redisSettings, c Clock, onCall func(ctx context.Context, call, rule string, d time.Duration, err error)) (*outage.Store, *redisstore.Store) {
	os := st.outage.withDefaults()
	timeout := store.NewTimeout(os.timeout)
	// A client that applies context deadlines to its sockets keeps the
	// timeout by itself; any other needs a goroutine per call to keep it.
	// The Redis store's batcher keeps it for reserve calls with one
	// goroutine per pipeline, not per call; the other calls (cancels, pause,
	// adapt, and the reserve calls of split requests, which beat and roll
	// back outside the batcher) keep the outage store's guard.
	guard := !honoursDeadlines(st.rdb)
	rs := redisstore.New(st.rdb, redisstore.Options{Namespace: st.namespace, TagPerKey: st.tagPerKey, Beat: c, Timeout: timeout, Guard: guard, NowMicros: st.nowMicros})
	return outage.New(rs, c, outage.Options{
		Mode:        outage.Mode(os.mode),
		Share:       os.share,
		OnChange:    modeChanges(os.onChange),
		Timeout:     timeout,
		Fleet:       rs.FleetSize,
		Guard:       guard,
		ReserveKept: !rs.Split(),
		OnCall:      onCall,
	}), rs
}

// modeChanges turns the outage store's reports of its changes into the
// user's [ModeChange]s for fn, or returns nil when fn is nil.
func modeChanges(fn func(ModeChange)) func(outage.Change) {
	if fn == nil {
		return nil
	}
	return func(c outage.Change) {
		fn(ModeChange{From: Mode(c.From), To: Mode(c.To), At: c.At, Err: c.Err})
	}
}

// withDefaults fills in the defaults of the settings left zero.
func (os outageSettings) withDefaults() outageSettings {
	if os.timeout <= 0 {
		os.timeout = defaultRedisTimeout
	}
	if os.mode == ModeLocal {
		os.mode = ModeFallback
	}
	return os
}

// honoursDeadlines reports whether rdb applies context deadlines to its
// socket reads (go-redis's ContextTimeoutEnabled). Clients of other types
// are assumed not to.
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// checkRedisRules rejects rules the Redis store cannot run exactly: an
// interval under its one-microsecond resolution, or a bucket spanning more
// than redisstore.MaxSpanMicros.
func checkRedisRules(rules []Rule, headroom float64) error {
	crs, err := compileRules(rules, headroom)
	if err != nil {
		return err
	}
	for _, c := range crs {
		if !c.rated() {
			continue
		}
		if c.interval < time.Microsecond {
			return &RuleError{Rule: c.Name, Field: "Limit.Rate", Reason: fmt.Sprintf(
				"%d per %v is more than one per microsecond, the resolution of the Redis store", c.Limit.Rate, c.Limit.Period)}
		}
		if redisstore.Micros(c.interval) > redisstore.MaxSpanMicros/c.burst {
			return &RuleError{Rule: c.Name, Field: "Limit.Period", Reason: fmt.Sprintf(
				"a bucket of %d × %v spans more than the Redis store's %v", c.burst, c.interval, time.Duration(redisstore.MaxSpanMicros)*time.Microsecond)}
		}
	}
	return nil
}

// pauseWatch is a Transport's subscription to the pauses and stretches of its namespace
// (redisstore.Store.Watch): started by the Transport's first request,
// so that a Transport never used holds no connection, and stopped by
// Transport.Close. It is safe for concurrent use; the zero pauseWatch (a
// Transport without Redis, or without feedback) does nothing.
type pauseWatch struct {
	watch func() (stop func()) // nil: nothing to watch
	once  sync.Once            // starts it, or keeps a closed one from starting
	stop  func()               // set by once; Watch's stop is idempotent
}

// ensure starts the subscription unless it is running or closed.
func (w *pauseWatch) ensure() {
	if w.watch != nil {
		w.once.Do(func() { w.stop = w.watch() })
	}
}

// close stops the subscription and keeps it from starting again.
func (w *pauseWatch) close() {
	w.once.Do(func() {})
	if w.stop != nil {
		w.stop()
	}
}
