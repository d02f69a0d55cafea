package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/throttlekit/throttle/header"
)

// Defaults of the Transport's options, each documented by its option.
const (
	// defaultMaxWait bounds how long a request waits for its slot when the
	// request's context has no earlier deadline.
	defaultMaxWait = 30 * time.Second

	// defaultMaxQueue bounds the requests of this process waiting in one
	// bucket. It keeps a stalled bucket from piling up goroutines.
	defaultMaxQueue = 10_000

	// defaultHeadroom is the fraction of each rule's rate kept in reserve
	// (see WithHeadroom).
	defaultHeadroom = 0.02
)

// Option configures a Transport; the With... functions of this package
// make them. An Option is a value: it may be reused for several
// Transports and applied from several goroutines. A nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set.
type config struct {
	rules    []Rule
	maxWait  time.Duration
	maxQueue int
	headroom float64
	clock    Clock
	errs     []error // invalid option values, reported by New
	// onStoreCall reports the Redis calls as events (Transport.storeCalls);
	// New sets it, no option does.
	onStoreCall func(ctx context.Context, call, rule string, d time.Duration, err error)

	dialects      []header.Dialect
	maxRetryAfter time.Duration
	retry         RetryPolicy
	// noFeedback, set by WithoutFeedback, leaves buckets to their rules.
	noFeedback bool
	// redis, when it has a client (WithRedis), makes the store shared by
	// the fleet.
	redis redisSettings
	// leaseTTL is WithLeaseTTL's; 0: the lease store's default.
	leaseTTL time.Duration
	// observers are WithObserver's and WithLogger's (observer.go).
	observers []Observer
}

func defaultConfig() config {
	return config{
		maxWait:  defaultMaxWait,
		maxQueue: defaultMaxQueue,
		headroom: defaultHeadroom,
		clock:    systemClock{},
		redis:    redisSettings{namespace: defaultNamespace},
	}
}

// WithRules adds rules to the Transport. Each request waits in the bucket of
// every rule it matches; a request no rule matches goes at once. Rules are
// validated by [New] (and by [NewTransport], whose RoundTrip then reports
// the error). Without WithRules (or with no rules) the Transport has none.
// The rules are copied when the Transport is made (see [Rule]).
func WithRules(rules ...Rule) Option {
	return optionFunc(func(c *config) { c.rules = append(c.rules, rules...) })
}

// WithMaxWait bounds the wait for a slot. A request whose slot lies further
// ahead fails at once with a [*WaitError] wrapping [ErrBeyondMaxWait], and
// books nothing. The request's context deadline, when earlier, bounds the
// wait too. If d ≤ 0, 30 s, the default, as for every duration option of
// this package; [WithoutWaiting] makes requests never wait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			d = defaultMaxWait
		}
		c.maxWait = d
	})
}

// WithoutWaiting makes no request wait for its slot: a request either goes
// at once or fails with a [*WaitError] wrapping [ErrBeyondMaxWait], booking
// nothing. It replaces any [WithMaxWait] before it, and a later WithMaxWait
// replaces it.
func WithoutWaiting() Option {
	return optionFunc(func(c *config) { c.maxWait = 0 })
}

// WithMaxQueue bounds how many requests of this process may wait in one
// bucket. A request needing a bucket that already has n waiters fails at
// once with a [*QueueFullError] wrapping [ErrQueueFull]. If n ≤ 0, no
// request may wait. Without WithMaxQueue, 10 000: a bound that keeps a
// stalled bucket from piling up goroutines.
func WithMaxQueue(n int) Option {
	return optionFunc(func(c *config) { c.maxQueue = max(n, 0) })
}

// WithHeadroom sets the fraction of every rule's rate kept in reserve
// against jitter, in [0, 0.5]; 0 runs rules at exactly their rate, and a
// fraction outside [0, 0.5] is a configuration error, an [*OptionError].
//
// Without WithHeadroom, 0.02. A rule equal to the provider's quota would
// otherwise meet 429s from latency jitter alone: a server counting a
// strict window sees the arrivals shifted by the network. Running at 98 %
// of the rate absorbs 2 % of the period in jitter (20 ms for a per-second
// quota, 1.2 s for a per-minute one) and costs 2 % of the quota.
func WithHeadroom(fraction float64) Option {
	return optionFunc(func(c *config) {
		if !(fraction >= 0 && fraction <= 0.5) {
			c.errs = append(c.errs, &OptionError{Option: "WithHeadroom", Reason: fmt.Sprintf("must be within [0, 0.5], got %v", fraction)})
			return
		}
		c.headroom = fraction
	})
}

// WithClock sets the clock used for waits and, in the local store, for
// bucket arithmetic. The Redis store always uses Redis's clock for the
// latter. A nil Clock, like no WithClock, means the system clock. The
// Clock must be safe for concurrent use (see [Clock]).
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) {
		if c == nil {
			c = systemClock{}
		}
		cfg.clock = c
	})
}

// WithoutFeedback makes the Transport ignore what responses say about the
// server's limits: no response pauses or slows a bucket. Rules alone then
// pace requests, which is the baseline that reading the server's answers
// must never fall below (docs/FEEDBACK.md). Retries still follow the
// [RetryPolicy], which reads Retry-After for its own delay. Without
// WithoutFeedback, responses are read.
func WithoutFeedback() Option {
	return optionFunc(func(c *config) { c.noFeedback = true })
}
