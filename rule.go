package throttle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// Limit is a rate: Rate requests (or units of cost) per Period, with bursts of
// up to Burst at once. Limit{Rate: 100, Period: time.Second, Burst: 10} lets
// ten requests go at once, then one every 10ms.
//
// The zero Limit is invalid: Rate and Period must be positive and Burst at
// least 1, or 0 for a rule of a window algorithm (FixedWindow, SlidingLog,
// SlidingCounter), whose quota per Period is Rate. A Limit is a plain
// value, safe to copy and to share between goroutines.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// Rule is one quota: a Limit applied to the requests it matches, in one
// bucket per partition key, or a cap on the requests in flight at once
// (Concurrency), or both.
//
// A Rule is a value; the Transport copies it at construction, so changing a
// Rule afterwards has no effect (the slices and functions it holds are
// shared, not copied: leave them as they are). The zero Rule is invalid: it
// needs a Name and a valid Limit, a Concurrency, or both. A Transport calls its functions (Key,
// Cost, Match.Func) from the goroutines of concurrent requests.
type Rule struct {
	// Name identifies the rule in errors and, with WithRedis, in Redis keys.
	// It must be unique within a Transport and non-empty.
	Name string

	// Limit is the quota. The zero Limit, in a rule with a Concurrency,
	// means no rate: the rule caps only the requests in flight.
	Limit Limit

	// Concurrency is the most requests of the rule's partition that may be
	// in flight at once across the whole fleet (0: no cap). A request is in
	// flight from when it is sent until its response body is closed or
	// read to its end, or the transport fails it: a caller that never
	// closes a body holds its lease until the lease's TTL runs out (see
	// [WithLeaseTTL]). A request matched by several rules takes a rate slot
	// and a lease in each, all or none. Requests waiting for a lease are
	// served by priority (see [WithPriority]), then in the order they came.
	Concurrency int

	// Algorithm is how the quota is counted (see [Algorithm]). The zero
	// Algorithm is LeakyBucket. A window algorithm (FixedWindow,
	// SlidingLog, SlidingCounter) takes Limit.Burst 0; the others need a
	// Burst of at least 1.
	Algorithm Algorithm

	// Match selects the requests the rule applies to. The zero Match
	// matches every request.
	Match Match

	// Key partitions the rule: requests with different keys use different
	// buckets (per account, per API key, ...). Keys are hashed before they
	// are stored anywhere, so a key may be a secret. A nil Key puts every
	// matching request in one bucket. Key is called for every matching
	// request, from concurrent goroutines: it must be safe for concurrent
	// use and must not modify the request (nor read its body).
	Key func(*http.Request) string

	// Cost weighs a request in units of Limit.Rate. A nil Cost weighs every
	// request 1. A cost below 1 counts as 1; a cost above Limit.Burst (for
	// a window algorithm, above its quota per window) can never be
	// admitted and fails the request with a [*RuleError]. Like
	// Key, it must be safe for concurrent use and must not modify the
	// request.
	Cost func(*http.Request) int

	// ActualCost, if set, reads from a response what its request really
	// cost, in units of Limit.Rate, when the server says so (Shopify's
	// GraphQL cost, a points header): ok false when the response does not
	// tell. The difference from Cost's estimate is then charged to the
	// request's bucket, or refunded (never into the past: a refund frees
	// capacity from now on, as if the units had never been spent), for the
	// whole fleet. A refund to a bucket with requests queued becomes its
	// credit, which the next request that would queue takes at once, for
	// as long as the server's bucket can still hold it (see
	// docs/CONCURRENCY.md, "Credits"). It is called once per response, before the Transport
	// returns it, from concurrent goroutines; it may read the body if it
	// puts back an equivalent one (see providers.ShopifyGraphQLCost), and
	// must not keep the response. A cost below 1 counts as 1.
	ActualCost func(*http.Response) (cost int, ok bool)
}

// KeyHeader returns a [Rule.Key] that partitions by the value of a request
// header, such as an API key or an account id: requests without the header
// share one bucket. The value is hashed before use. The function it returns
// is safe for concurrent use.
func KeyHeader(name string) func(*http.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// Match selects requests. All set fields must match; the zero Match matches
// every request. A Transport only reads a Match, from concurrent requests;
// Func must be safe for concurrent use.
type Match struct {
	// Host is the request's host, compared without case and without port
	// unless Host has one. A leading "*." matches any subdomain.
	Host string
	// Methods lists the methods matched; empty means any.
	Methods []string
	// PathPrefix matches paths that start with it.
	PathPrefix string
	// Path is a pattern for path.Match, such as "/v1/customers/*".
	Path string
	// Func, if set, must also return true. It must be safe for concurrent
	// use and must not modify the request.
	Func func(*http.Request) bool
}

// Matches reports whether m selects r. The host it compares is where r
// goes, r.URL.Host, as a Transport sends it; a server's request, whose
// URL has no host, is compared by its Host header (r.Host), so that the
// middleware and throttletest read a rule's Match as the Transport does.
// A request with no method is a GET.
func (m *Match) Matches(r *http.Request) bool {
	host := r.URL.Host
	if host == "" {
		host = r.Host
	}
	if m.Host != "" && !hostMatches(m.Host, host) {
		return false
	}
	if len(m.Methods) > 0 {
		method := r.Method
		if method == "" {
			method = http.MethodGet
		}
		found := false
		for _, x := range m.Methods {
			if strings.EqualFold(x, method) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if m.PathPrefix != "" && !strings.HasPrefix(r.URL.Path, m.PathPrefix) {
		return false
	}
	if m.Path != "" {
		if ok, _ := path.Match(m.Path, r.URL.Path); !ok {
			return false
		}
	}
	return m.Func == nil || m.Func(r)
}

func hostMatches(pattern, host string) bool {
	if !strings.Contains(pattern, ":") {
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return len(host) > len(suffix) && strings.HasSuffix(strings.ToLower(host), "."+strings.ToLower(suffix))
	}
	return strings.EqualFold(pattern, host)
}

// compiledRule is a validated Rule with its bucket parameters worked out
// (see leaky.go).
type compiledRule struct {
	Rule
	leakyBucket
	headroom  float64
	algorithm store.Algorithm
	// window is what the stores count a window bucket over
	// (store.Bucket.Period): the rule's Period, longer for a sliding log
	// (slidingLogWindow).
	window time.Duration
	// edge is a fixed window's store.Bucket.Edge (windowEdge).
	edge time.Duration
	// anchors are a FixedWindow rule's windows' starts learnt from the
	// server's resets (anchor.go).
	anchors anchors
}

// maxConcurrency bounds Rule.Concurrency: far above any provider's cap
// (GitHub's 100 is the highest published), low enough that a lease set in
// Redis stays small.
const maxConcurrency = 1 << 16

// rated reports whether c has a rate, a bucket of its own, and not only a
// concurrency cap.
func (c *compiledRule) rated() bool { return c.interval > 0 }

// compileRules validates rules and works out their bucket parameters.
func compileRules(rules []Rule, headroom float64) ([]*compiledRule, error) {
	seen := make(map[string]bool, len(rules))
	out := make([]*compiledRule, 0, len(rules))
	for i, r := range rules {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		bad := func(field, reason string) error { return &RuleError{Rule: name, Field: field, Reason: reason} }
		switch {
		case r.Name == "":
			return nil, bad("Name", "must not be empty")
		case seen[r.Name]:
			return nil, bad("Name", "is used by another rule")
		case r.Concurrency < 0:
			return nil, bad("Concurrency", fmt.Sprintf("must be >= 0, got %d", r.Concurrency))
		case r.Concurrency > maxConcurrency:
			return nil, bad("Concurrency", fmt.Sprintf("must be <= %d, got %d", maxConcurrency, r.Concurrency))
		case r.Concurrency > 0 && r.Limit == (Limit{}) && r.ActualCost != nil:
			return nil, bad("ActualCost", "needs a Limit: a rule with a Concurrency alone has no bucket to charge")
		case r.Concurrency > 0 && r.Limit == (Limit{}) && r.Algorithm != LeakyBucket:
			return nil, bad("Algorithm", "needs a Limit: a rule with a Concurrency alone has no bucket to count")
		case r.ActualCost != nil && r.Algorithm.windowed():
			return nil, bad("ActualCost", fmt.Sprintf("is read for leaky and token buckets only, not %v: a window counts a request where it departed, and a correction would have to find that window again", r.Algorithm))
		case r.Concurrency > 0 && r.Limit == (Limit{}):
			// A concurrency cap alone: no rate bucket, nothing more of
			// the Limit to check.
		case r.Limit.Rate <= 0:
			return nil, bad("Limit.Rate", fmt.Sprintf("must be > 0, got %d", r.Limit.Rate))
		case r.Limit.Period <= 0:
			return nil, bad("Limit.Period", fmt.Sprintf("must be > 0, got %v", r.Limit.Period))
		}
		rated := r.Limit != (Limit{})
		if rated {
			if err := checkAlgorithm(&r, bad); err != nil {
				return nil, err
			}
		}
		if r.Match.Path != "" {
			if _, err := path.Match(r.Match.Path, ""); err != nil {
				return nil, bad("Match.Path", fmt.Sprintf("bad pattern %q: %v", r.Match.Path, err))
			}
		}
		seen[r.Name] = true
		if !rated {
			out = append(out, &compiledRule{Rule: r, headroom: headroom})
			continue
		}
		window := r.Limit.Period
		if r.Algorithm == SlidingLog {
			window = slidingLogWindow(r.Limit, headroom)
		}
		a := r.Algorithm.storeAlgorithm()
		edge := windowEdge(a, window, headroom)
		lb := newBucket(r.Algorithm, r.Limit, headroom, edge)
		if lb.interval <= 0 {
			return nil, bad("Limit.Rate", fmt.Sprintf("%d per %v is more than one per nanosecond", r.Limit.Rate, r.Limit.Period))
		}
		out = append(out, &compiledRule{Rule: r, leakyBucket: lb, headroom: headroom, algorithm: a, window: window, edge: edge})
	}
	return out, nil
}

// bucketKey returns the bucket of request r under rule c: the rule's name and
// a hash of the partition key, so that no secret is ever kept or stored raw.
func (c *compiledRule) bucketKey(r *http.Request) string {
	if c.Key == nil {
		return c.Name
	}
	return c.Name + ":" + hashKey(c.Key(r))
}

// cost returns the weight of r under c, at least 1.
func (c *compiledRule) cost(r *http.Request) int64 {
	if c.Cost == nil {
		return 1
	}
	if n := c.Cost(r); n > 1 {
		return int64(n)
	}
	return 1
}

// hashKey returns a short, stable digest of a partition key: 128 bits of
// SHA-256, hex encoded. It is what stands for the key in memory and in Redis.
func hashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:16])
}
