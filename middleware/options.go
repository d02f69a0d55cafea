package middleware

import (
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle"
)

// Option configures a Limiter; the With... functions of this package make
// them. An Option is a value: it may be reused for several Limiters. A nil
// Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set.
type config struct {
	tiers     map[string][]throttle.Rule
	tierOrder []string
	tierOf    func(*http.Request) string
	clock     throttle.Clock
	maxWait   time.Duration
	headers   func(http.Header, Decision)
	refusal   func(http.ResponseWriter, *http.Request, Decision)
	rdb       redis.UniversalClient
	namespace string
	timeout   time.Duration
	mode      throttle.Mode
	share     float64
	tagPerKey bool
	noRoom    bool
	errs      []error
}

func (c *config) addTier(name string, rules []throttle.Rule) {
	if c.tiers == nil {
		c.tiers = make(map[string][]throttle.Rule)
	}
	if _, ok := c.tiers[name]; !ok {
		c.tierOrder = append(c.tierOrder, name)
	}
	c.tiers[name] = append(c.tiers[name], rules...)
}

func optionError(option, format string, args ...any) error {
	return &throttle.OptionError{Option: option, Reason: fmt.Sprintf(format, args...)}
}

// WithRules adds rules to the default tier: the rules of every request
// whose tier ([WithTierFunc]) is "" or names no tier. Without rules a
// Limiter admits every request (and sends no rate-limit headers). Rules
// are validated as the Transport validates them (a *throttle.RuleError
// naming the rule and field); Limit.Burst is the bucket's capacity, and no
// headroom is taken off (a server enforces its own quota exactly).
func WithRules(rules ...throttle.Rule) Option {
	return optionFunc(func(c *config) { c.addTier("", rules) })
}

// WithTier adds a tier: a set of rules chosen per request by
// [WithTierFunc], such as "pro" with 10 000 requests a minute beside a
// default of 100. Rule names are unique within a tier; tiers may reuse
// them, and their buckets stay apart. Several WithTier of one name add to
// it. An invalid rule of a tier is a *throttle.RuleError whose Rule is
// "tier/name".
func WithTier(name string, rules ...throttle.Rule) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			c.errs = append(c.errs, optionError("WithTier", "the tier name must not be empty (the default tier is WithRules')"))
			return
		}
		c.addTier(name, rules)
	})
}

// WithTierFunc sets how a request's tier is chosen: fn returns a name
// given to [WithTier], or "" (or an unknown name) for the default tier of
// [WithRules]. Without it every request is in the default tier. fn is
// called for every request, from concurrent goroutines, and must not
// modify the request.
func WithTierFunc(fn func(*http.Request) string) Option {
	return optionFunc(func(c *config) { c.tierOf = fn })
}

// WithClock sets the clock of the Limiter's buckets and waits: the system
// clock by default and for nil. A fake clock makes tests deterministic
// (the in-process store reads its time; with WithRedis, Redis's clock
// decides and this one only times the waits).
func WithClock(clk throttle.Clock) Option {
	return optionFunc(func(c *config) { c.clock = clk })
}

// WithMaxWait makes the Limiter queue: a request over a rule's rate waits
// up to d for its slot (booked at once, so waiters keep their order), and
// is refused at once, booking nothing, if its slot lies further ahead or
// beyond its context's deadline. A wait whose context ends gives its slot
// back. If d ≤ 0 (the default) requests never wait. Concurrency caps never
// wait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxWait = max(d, 0) })
}

// WithHeaders replaces the standard headers ([SetStandardHeaders]) of every
// response, admitted or refused: fn sets its own on h (a provider's shape,
// such as Shopify's X-Shopify-Shop-Api-Call-Limit: 32/40), and may call
// SetStandardHeaders too. A nil fn sends no rate-limit headers. fn runs
// before the handler (or the refusal) writes, from concurrent goroutines.
func WithHeaders(fn func(h http.Header, d Decision)) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			fn = func(http.Header, Decision) {}
		}
		c.headers = fn
	})
}

// WithRefusal replaces how a refused request is answered (by default
// [WriteRefusal]: 429, or 503 for ReasonUnavailable, with Retry-After and
// a JSON body): fn writes the whole response (status, headers, body). The
// headers of [WithHeaders] (or the standard ones) are already set on w
// when fn runs; r's context carries d too ([DecisionFrom]). A nil fn
// means WriteRefusal.
func WithRefusal(fn func(w http.ResponseWriter, r *http.Request, d Decision)) Option {
	return optionFunc(func(c *config) { c.refusal = fn })
}

// WithRedis shares the Limiter's buckets through Redis, with every replica
// given the same client settings and rules: one script call per request,
// Redis's clock. The Limiter never closes rdb: its owner does. See
// [WithOutageMode] for what happens while Redis is unreachable.
func WithRedis(rdb redis.UniversalClient) Option {
	return optionFunc(func(c *config) { c.rdb = rdb })
}

// WithNamespace sets the namespace of the Limiter's Redis keys, so that
// several Limiters (or a Limiter and Transports) may share one Redis
// without sharing buckets. The default is "middleware".
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) {
		if ns == "" {
			c.errs = append(c.errs, optionError("WithNamespace", "the namespace must not be empty"))
			return
		}
		c.namespace = ns
	})
}

// WithRedisTimeout bounds each Redis call: a call that takes longer counts
// as an outage ([WithOutageMode]). If d ≤ 0, 50 ms.
func WithRedisTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.timeout = d })
}

// WithOutageMode sets what a Limiter given [WithRedis] does while Redis is
// unreachable: [throttle.ModeFallback] (the default) limits each rule in
// this process at this replica's share of it (one over the replicas
// counted by the heartbeat, or [WithFleetShare]); [throttle.ModeFailOpen]
// admits every request; [throttle.ModeFailClosed] answers 503 with
// Retry-After (ReasonUnavailable). Any other Mode is an
// *throttle.OptionError.
func WithOutageMode(m throttle.Mode) Option {
	return optionFunc(func(c *config) {
		switch m {
		case throttle.ModeFallback, throttle.ModeFailOpen, throttle.ModeFailClosed:
			c.mode = m
		default:
			c.errs = append(c.errs, optionError("WithOutageMode", "must be ModeFallback, ModeFailOpen or ModeFailClosed, got %v", m))
		}
	})
}

// WithFleetShare fixes this replica's share of each rule in
// ModeFallback (0 < fraction ≤ 1), instead of one over the live replicas
// the heartbeat counts (10 before it has counted).
func WithFleetShare(fraction float64) Option {
	return optionFunc(func(c *config) {
		if !(fraction > 0 && fraction <= 1) {
			c.errs = append(c.errs, optionError("WithFleetShare", "must be in (0, 1], got %v", fraction))
			return
		}
		c.share = fraction
	})
}

// WithHashTagPerKey spreads a rule's partitioned buckets (those of a rule
// with a Key) over a Redis Cluster: each bucket's key gets a hash tag of
// its own partition, instead of the namespace's one tag, which keeps every
// bucket on one node. A request whose buckets then lie on several nodes
// is booked by one script call per node, with a rollback if a later one
// refuses. Without a Cluster it changes nothing but the keys' names.
func WithHashTagPerKey() Option {
	return optionFunc(func(c *config) { c.tagPerKey = true })
}

// WithoutRedisRoom saves the second Redis call of an admitted request
// (the read of its buckets' room, see the package doc): one script call a
// request, twice the decisions a Redis sustains, and the standard headers
// of an admitted request without X-RateLimit-Remaining, -Reset and the
// RateLimit field ([Decision.QuotaKnown] false). Without WithRedis it
// changes nothing: the local store tells the room for free.
func WithoutRedisRoom() Option {
	return optionFunc(func(c *config) { c.noRoom = true })
}
