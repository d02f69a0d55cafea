package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// StripeConfig tunes [StripePreset]. The zero value describes one Stripe
// account in live mode on Stripe's own hosts.
type StripeConfig struct {
	// Test selects the limits of test mode (sandboxes): a global rate of
	// 25 requests/s instead of 100.
	Test bool

	// Hosts are the hosts the rules match. If empty: api.stripe.com,
	// files.stripe.com (file uploads) and meter-events.stripe.com (meter
	// event streams).
	Hosts []string

	// Key partitions every rule, for a fleet calling several Stripe
	// accounts, each with its own quota: throttle.KeyHeader("Authorization")
	// when each account has its own secret key (the Transport hashes it).
	// If nil, every request shares one account's buckets.
	Key func(*http.Request) string

	// Concurrency, if positive, adds stripe-concurrency: at most this many
	// requests in flight per account, fleet-wide (see
	// [throttle.Rule.Concurrency]). Stripe runs a concurrency limiter but
	// publishes no number for it (docs.stripe.com/rate-limits, read
	// 2026-11), so the preset sets none by default; a 429 whose
	// Stripe-Rate-Limited-Reason is global-concurrency or
	// endpoint-concurrency lowers this cap for the fleet.
	Concurrency int
}

// stripeHosts are Stripe's API hosts.
var stripeHosts = []string{"api.stripe.com", "files.stripe.com", "meter-events.stripe.com"}

// StripePreset returns Stripe's rate limits (docs.stripe.com/rate-limits):
//
//   - stripe-global: 100 requests/s in live mode, 25 in test mode, every
//     request but meter events.
//   - stripe-endpoint: 25 requests/s per endpoint, the default endpoint
//     limit; an endpoint is the method and the path with its object IDs
//     replaced, see [StripeEndpoint].
//   - stripe-files-read and stripe-files-write: 20 reads/s and 20 writes/s
//     on the Files API (/v1/files).
//   - stripe-search: 20 requests/s over all search endpoints together
//     (/v1/<object>/search); one bucket for all of them is the cautious
//     reading of the docs.
//   - stripe-meter-events: 1,000 meter events/s, counted apart from the
//     global limit (/v1/billing/meter_events and the v2 meter event
//     endpoints). The docs give it for live mode; test mode gets the same
//     number here, unconfirmed.
//
// Stripe's stricter limits on single objects (1,000 updates per
// PaymentIntent per hour, subscription invoices) and the payout and
// Connect limits (unconfirmed: secondary sources) are not rules: partition
// by object is rarely worth a bucket per object; add rules for them if you
// need them. Bursts follow the Preset doc (1 % of the rate, at least 1):
// Stripe publishes no bucket size.
//
// The dialect is [Stripe]: Stripe sends no Retry-After, only
// Stripe-Rate-Limited-Reason, so a 429 from Stripe is retried with backoff
// by the Transport rather than paused for a server-given time.
func StripePreset(c StripeConfig) Preset {
	hosts := c.Hosts
	if len(hosts) == 0 {
		hosts = stripeHosts
	}
	global := 100
	if c.Test {
		global = 25
	}
	onHost := func(r *http.Request) bool { return hostIs(r.URL.Host, hosts) }
	counted := func(r *http.Request) bool { return onHost(r) && !isStripeMeterEvent(r.URL.Path) }
	reads := []string{http.MethodGet, http.MethodHead}
	filesWrite := func(r *http.Request) bool {
		return onHost(r) && r.Method != "" && r.Method != http.MethodGet && r.Method != http.MethodHead
	}
	rule := func(name string, rate int, m throttle.Match, key func(*http.Request) string) throttle.Rule {
		if key == nil {
			key = c.Key
		}
		return throttle.Rule{
			Name:  ruleName("stripe", name),
			Limit: throttle.Limit{Rate: rate, Period: time.Second, Burst: burstOf(rate)},
			Match: m,
			Key:   key,
		}
	}
	p := Preset{
		Name: stripeName,
		Rules: []throttle.Rule{
			rule("global", global, throttle.Match{Func: counted}, nil),
			rule("endpoint", 25, throttle.Match{Func: counted},
				withKey(c.Key, func(r *http.Request) string { return StripeEndpoint(r.Method, r.URL.Path) })),
			rule("files-read", 20, throttle.Match{PathPrefix: "/v1/files", Methods: reads, Func: onHost}, nil),
			rule("files-write", 20, throttle.Match{PathPrefix: "/v1/files", Func: filesWrite}, nil),
			rule("search", 20, throttle.Match{Path: "/v1/*/search", Func: onHost}, nil),
			rule("meter-events", 1000, throttle.Match{Func: func(r *http.Request) bool {
				return onHost(r) && isStripeMeterEvent(r.URL.Path)
			}}, nil),
		},
		Dialect: Stripe,
	}
	if c.Concurrency > 0 {
		p.Rules = append(p.Rules, throttle.Rule{Name: ruleName("stripe", "concurrency"), Concurrency: c.Concurrency, Match: throttle.Match{Func: onHost}, Key: c.Key})
	}
	return p
}

// isStripeMeterEvent reports whether path is one of Stripe's meter event
// endpoints, which have their own limit apart from the global one.
func isStripeMeterEvent(path string) bool {
	return strings.HasPrefix(path, "/v1/billing/meter_events") ||
		strings.HasPrefix(path, "/v2/billing/meter_event")
}

// StripeEndpoint returns the endpoint of a Stripe request: its method and
// its path with every object ID replaced by "{id}", as in
// "POST /v1/customers/{id}" for POST /v1/customers/cus_123. A trailing
// slash is dropped and an empty method means GET.
//
// An ID is a path segment, after the version ("v1"), with a character other
// than a lowercase letter or '_': Stripe's IDs ("cus_NffrFeUfNV2Hib",
// "pi_3MtwBw...", "US" in /v1/country_specs/US) all have one, and the names
// of its resources ("payment_intents", "search") have none. An ID you chose
// yourself made only of lowercase letters and underscores (a product named
// "premium") is not recognised: such calls get a bucket per ID in
// stripe-endpoint, which then under-counts them; stripe-global still holds.
func StripeEndpoint(method, path string) string {
	if method == "" {
		method = http.MethodGet
	}
	segs := strings.Split(strings.TrimSuffix(path, "/"), "/")
	for i, s := range segs {
		if i >= 2 && isStripeID(s) {
			segs[i] = "{id}"
		}
	}
	return method + " " + strings.Join(segs, "/")
}

// isStripeID reports whether a path segment is an object ID rather than a
// resource name (see StripeEndpoint).
func isStripeID(seg string) bool {
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; (c < 'a' || c > 'z') && c != '_' {
			return true
		}
	}
	return false
}

// Stripe reads Stripe-Rate-Limited-Reason ("global-rate", "endpoint-rate",
// "global-concurrency", "endpoint-concurrency", "resource-specific") into
// Reason and Stripe-Should-Retry ("true"/"false") into ShouldRetry. Stripe
// documents no Retry-After or remaining-count headers, so a limited Stripe
// response names no wait: use your own backoff. A 429 with code
// lock_timeout (object lock contention, not a rate limit) can only be told
// apart by its body. It names itself "stripe" in header.Signal.Dialect
// when it read either field.
//
// Source: docs.stripe.com/rate-limits; stripe-go (Stripe-Should-Retry).
var Stripe header.Dialect = header.DialectFunc(parseStripe)

// Canonical keys of the fields the Stripe dialect reads.
var (
	stripeLimitedReason = http.CanonicalHeaderKey("Stripe-Rate-Limited-Reason")
	stripeShouldRetry   = http.CanonicalHeaderKey("Stripe-Should-Retry")
)

func parseStripe(_ int, h http.Header, _ time.Time, s *header.Signal) {
	if r := value(h, stripeLimitedReason); r != "" {
		s.Reason = r
		s.Concurrent = r == "global-concurrency" || r == "endpoint-concurrency"
		s.Dialect = stripeName
	}
	if hint := header.ParseShouldRetry(value(h, stripeShouldRetry)); hint != header.RetryHintNone {
		s.ShouldRetry = hint
		s.Dialect = stripeName
	}
}
