package fleettest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle"
)

// EnvWorker is the environment variable that turns a re-executed test
// binary into a worker: its value is the worker's [WorkerConfig] as JSON.
// [DispatchWorker] looks for it.
const EnvWorker = "THROTTLE_FLEET_WORKER"

// WorkerConfig is everything a worker process needs. It travels to the
// child as JSON in [EnvWorker]; every field is plain data.
//
// The zero value is not runnable: URL, Duration and at least one goroutine
// are needed. [Start] fills ID.
type WorkerConfig struct {
	// ID is the worker's index in the fleet, sent in [WorkerHeader]. Start
	// sets it from the config's position.
	ID int `json:"id"`

	// URL is what every request GETs: usually Server.URL plus a path.
	URL string `json:"url"`

	// RedisAddrs are the Redis addresses the shared bucket lives in. Empty
	// means the local store: each worker then has buckets of its own. One
	// address gives a single-node client, several a Cluster client
	// (redis.NewUniversalClient's rule).
	RedisAddrs []string `json:"redis_addrs,omitempty"`
	// RedisUsername and RedisPassword authenticate to Redis (ACL user).
	RedisUsername string `json:"redis_username,omitempty"`
	RedisPassword string `json:"redis_password,omitempty"`
	// Namespace separates fleets sharing one Redis (throttle.WithNamespace).
	// Empty keeps the transport's default.
	Namespace string `json:"namespace,omitempty"`

	// Rules are the transport's rules.
	Rules []RuleConfig `json:"rules"`
	// Headroom, when set, is passed to throttle.WithHeadroom; nil keeps
	// the Transport's default headroom (2 %, see throttle.WithHeadroom).
	Headroom *float64 `json:"headroom,omitempty"`
	// MaxWait, when positive, is passed to throttle.WithMaxWait.
	MaxWait time.Duration `json:"max_wait,omitempty"`
	// MaxQueue, when positive, is passed to throttle.WithMaxQueue.
	MaxQueue int `json:"max_queue,omitempty"`

	// MaxAttempts, when positive, sets the retry policy:
	// throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: n}); 1 disables
	// retries. Zero keeps the transport's default policy (retries on).
	MaxAttempts int `json:"max_attempts,omitempty"`

	// NoFeedback passes throttle.WithoutFeedback: the rules alone pace the
	// worker, the baseline that header reading is compared with.
	NoFeedback bool `json:"no_feedback,omitempty"`
	// Dialects names provider dialects the transport reads responses
	// with (throttle.WithDialects), beside the standard parsers: "github",
	// "openai", "shopify", "stripe", "anthropic", "discord", "salesforce",
	// "hubspot" (see [Dialect]). A [Shape] lists those it needs. An
	// unknown name fails the worker.
	Dialects []string `json:"dialects,omitempty"`

	// Methods, when set, are the methods the goroutines send: goroutine g
	// sends Methods[g mod len(Methods)]. Empty: GET.
	Methods []string `json:"methods,omitempty"`
	// Priority, when set, gives every request of the worker that priority
	// (throttle.WithPriority): "low", "normal" or "high".
	Priority string `json:"priority,omitempty"`
	// LeaseTTL, when positive, is passed to throttle.WithLeaseTTL.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`

	// Knobs for the outage issue (5) whose options do not exist yet. The
	// worker applies none of them itself: a test that sets one must give
	// [DispatchWorker] an [OptionsFunc] that turns it into options, or the
	// worker fails with an error naming the knob rather than silently
	// running without it.
	//
	// Fallback names the outage mode: "local", "open" or "closed".
	Fallback string `json:"fallback,omitempty"`
	// RedisTimeout bounds each Redis call of the transport.
	RedisTimeout time.Duration `json:"redis_timeout,omitempty"`
	// Extra carries anything else a test's OptionsFunc understands.
	Extra map[string]string `json:"extra,omitempty"`

	// Load.
	//
	// Goroutines is the number of goroutines looping over requests.
	Goroutines int `json:"goroutines"`
	// Interval paces each goroutine: when positive, a goroutine sends at
	// most one request per Interval, on a fixed schedule from the start
	// (the k-th request no earlier than start + k·Interval). Zero sends the
	// next request as soon as the previous one is answered.
	Interval time.Duration `json:"interval,omitempty"`
	// Duration is how long the worker sends, from the common start. Every
	// request's context ends at start + Duration, so no request departs
	// after it (requests whose slot lies beyond fail with
	// throttle.ErrBeyondDeadline, counted in Summary.Errors).
	Duration time.Duration `json:"duration"`
	// Requests, when positive, stops the worker after that many requests
	// (attempts, across its goroutines), even before Duration.
	Requests int `json:"requests,omitempty"`
	// RecordDepartures makes the worker report the wall-clock time of
	// every departure in Summary.Departures, to tell a stalled worker from
	// a stalled server when arrivals bunch, or to check when each process
	// sent.
	RecordDepartures bool `json:"record_departures,omitempty"`
	// RequestTimeout, when positive, bounds each request's wait for its
	// slot (with the run's end) and, separately, its flight once departed.
	// A departed request is no longer bound by the run's end: it completes
	// under RequestTimeout, or 30 s when RequestTimeout is not set.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
}

// RuleConfig is a [throttle.Rule] as data. Its Match fields are those of
// [throttle.Match] without Func.
type RuleConfig struct {
	Name       string        `json:"name"`
	Rate       int           `json:"rate"`
	Period     time.Duration `json:"period"`
	Burst      int           `json:"burst"`
	Host       string        `json:"host,omitempty"`
	Methods    []string      `json:"methods,omitempty"`
	PathPrefix string        `json:"path_prefix,omitempty"`
	Path       string        `json:"path,omitempty"`
	// Algorithm names the rule's algorithm (throttle.Rule.Algorithm):
	// "leaky" or "" (the default), "token", "fixed", "sliding-log" or
	// "sliding-counter".
	Algorithm string `json:"algorithm,omitempty"`
	// KeyHeader, when set, partitions the rule by that request header
	// (throttle.KeyHeader).
	KeyHeader string `json:"key_header,omitempty"`
	// MethodCosts, when set, weighs each request by its method
	// (throttle.Rule.Cost): a method not listed costs 1.
	MethodCosts map[string]int `json:"method_costs,omitempty"`
	// ActualCostHeader, when set, reads each response's actual cost from
	// that header (throttle.Rule.ActualCost), as [WithPoints] sends it.
	ActualCostHeader string `json:"actual_cost_header,omitempty"`
	// Concurrency is the rule's cap on requests in flight
	// (throttle.Rule.Concurrency); 0: none. A rule with a Concurrency and
	// no Rate has no rate.
	Concurrency int `json:"concurrency,omitempty"`
}

// Rule returns the throttle.Rule rc describes.
func (rc RuleConfig) Rule() throttle.Rule {
	r := throttle.Rule{
		Name:  rc.Name,
		Limit: throttle.Limit{Rate: rc.Rate, Period: rc.Period, Burst: rc.Burst},
		Match: throttle.Match{Host: rc.Host, Methods: rc.Methods, PathPrefix: rc.PathPrefix, Path: rc.Path},
	}
	if rc.Rate == 0 && rc.Period == 0 && rc.Burst == 0 {
		r.Limit = throttle.Limit{}
	}
	r.Concurrency = rc.Concurrency
	r.Algorithm = algorithms[rc.Algorithm]
	if len(rc.MethodCosts) > 0 {
		costs := rc.MethodCosts
		r.Cost = func(req *http.Request) int {
			if c, ok := costs[req.Method]; ok {
				return c
			}
			return 1
		}
	}
	if h := rc.ActualCostHeader; h != "" {
		r.ActualCost = func(resp *http.Response) (int, bool) {
			n, err := strconv.Atoi(resp.Header.Get(h))
			return n, err == nil
		}
	}
	if rc.KeyHeader != "" {
		r.Key = throttle.KeyHeader(rc.KeyHeader)
	}
	return r
}

// Headroom returns a pointer to f, for [WorkerConfig.Headroom].
func Headroom(f float64) *float64 { return &f }

// validate reports what makes c unrunnable.
func (c *WorkerConfig) validate() error {
	switch {
	case c.URL == "":
		return fmt.Errorf("fleettest: worker %d: URL is empty", c.ID)
	case c.Duration <= 0:
		return fmt.Errorf("fleettest: worker %d: Duration must be > 0, got %v", c.ID, c.Duration)
	case c.Goroutines <= 0:
		return fmt.Errorf("fleettest: worker %d: Goroutines must be > 0, got %d", c.ID, c.Goroutines)
	}
	if _, err := priorityOf(c.Priority); err != nil {
		return fmt.Errorf("fleettest: worker %d: %w", c.ID, err)
	}
	for _, r := range c.Rules {
		if _, ok := algorithms[r.Algorithm]; !ok {
			return fmt.Errorf("fleettest: worker %d: rule %q: unknown algorithm %q", c.ID, r.Name, r.Algorithm)
		}
	}
	return nil
}

func (c *WorkerConfig) encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("fleettest: encode worker config: %w", err)
	}
	return string(b), nil
}

func decodeConfig(s string) (WorkerConfig, error) {
	var c WorkerConfig
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("fleettest: decode %s: %w", EnvWorker, err)
	}
	return c, c.validate()
}

// priorityOf returns the priority a WorkerConfig.Priority names.
func priorityOf(name string) (throttle.Priority, error) {
	switch name {
	case "", "normal":
		return throttle.PriorityNormal, nil
	case "low":
		return throttle.PriorityLow, nil
	case "high":
		return throttle.PriorityHigh, nil
	}
	return 0, fmt.Errorf("unknown priority %q (low, normal or high)", name)
}

// algorithms are the names RuleConfig.Algorithm takes.
var algorithms = map[string]throttle.Algorithm{
	"": throttle.LeakyBucket, "leaky": throttle.LeakyBucket, "token": throttle.TokenBucket,
	"fixed": throttle.FixedWindow, "sliding-log": throttle.SlidingLog, "sliding-counter": throttle.SlidingCounter,
}
