package providers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// Preset is one provider's published quotas as [throttle.Rule] values, with
// the provider's header [throttle.Dialect] when it has one:
//
//	p := providers.StripePreset(providers.StripeConfig{})
//	client := &http.Client{Transport: throttle.NewTransport(nil, p.Options()...)}
//
// Every rule of a preset matches the provider's hosts only, so presets can
// be combined with each other and with other rules in one Transport. Rule
// names start with the preset's Name and a hyphen ("stripe-global"); they
// are unique within a preset, and [Preset.Named] renames them when one
// Transport needs two presets of the same provider (a live and a test
// Stripe account, say).
//
// Every number is overridable: a Preset is plain data, so edit p.Rules (or
// the rule [Preset.Rule] returns) before passing it on. The constructors'
// docs cite the source of every number; those PROVIDERS research could not
// confirm from the provider's own pages are marked "unconfirmed".
//
// Bursts: GCRA admits Burst + Rate·t requests in any span t. Unless a
// constructor says otherwise, a rule's Burst is 1 % of its Rate (at least
// 1), so that with [throttle.DefaultHeadroom] (2 %) a preset stays under a
// quota counted on a strict window of its Period with half the headroom
// left for network jitter. A provider that documents a bigger bucket
// (Shopify) gets that bucket.
//
// Partition keys that are secrets (the Authorization header, API keys) are
// only ever passed to the Transport, which hashes them before using or
// storing them.
//
// The zero Preset has no rules and no dialect. A Preset is a value: it is
// not safe to modify while another goroutine reads it, but the functions in
// its rules (Match.Func, Key, Cost) are safe for concurrent use.
type Preset struct {
	// Name is the provider, lowercase ("stripe"); it prefixes every rule's
	// name.
	Name string

	// Rules are the provider's quotas.
	Rules []throttle.Rule

	// Dialect reads the provider's rate-limit headers beyond the standard
	// ones; nil when the standard parsers suffice.
	Dialect throttle.Dialect
}

// Options returns the options that give a Transport the preset's rules
// and, when it has one, its dialect: the Transport then reads the
// provider's answers (a 429 and its wait) and pauses the preset's buckets
// for the whole fleet. Later changes to p have no effect on them.
//
//	t := throttle.NewTransport(nil, append(p.Options(), throttle.WithRedis(rdb))...)
func (p Preset) Options() []throttle.Option {
	opts := []throttle.Option{throttle.WithRules(append([]throttle.Rule(nil), p.Rules...)...)}
	if p.Dialect != nil {
		opts = append(opts, throttle.WithDialects(p.Dialect))
	}
	return opts
}

// Rule returns the rule of p named name, for editing in place, or nil if p
// has none. The pointer is into p.Rules, which copies of p share.
func (p Preset) Rule(name string) *throttle.Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == name {
			return &p.Rules[i]
		}
	}
	return nil
}

// Named returns a copy of p whose Name is name and whose rules' names start
// with name instead of p.Name, so that one Transport can hold two presets of
// the same provider. The copy has its own Rules slice.
func (p Preset) Named(name string) Preset {
	q := p
	q.Name = name
	q.Rules = make([]throttle.Rule, len(p.Rules))
	for i, r := range p.Rules {
		if rest, ok := strings.CutPrefix(r.Name, p.Name); ok && p.Name != "" {
			r.Name = name + rest
		} else {
			r.Name = name + "-" + r.Name
		}
		q.Rules[i] = r
	}
	return q
}

// ruleName returns the name of a preset's rule.
func ruleName(preset, rule string) string { return preset + "-" + rule }

// burstOf returns the default burst of a rule of the given rate: 1 % of the
// rate, at least 1 (see the Preset doc).
func burstOf(rate int) int { return max(1, rate/100) }

// withKey returns a KeyFunc partitioning by the caller's key k (when not
// nil) and then by part. A NUL separates the two so that no pair of keys
// can run together into the same string.
func withKey(k throttle.KeyFunc, part func(*http.Request) string) throttle.KeyFunc {
	if k == nil {
		return part
	}
	return func(r *http.Request) string { return k(r) + "\x00" + part(r) }
}

// hostIs reports whether host (from a URL, perhaps with a port) is one of
// patterns, compared as [throttle.Match] compares Host: without case, and
// without port unless the pattern has one.
func hostIs(host string, patterns []string) bool {
	for _, p := range patterns {
		h := host
		if !strings.Contains(p, ":") {
			if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
				h = h[:i]
			}
		}
		if strings.EqualFold(p, h) {
			return true
		}
	}
	return false
}

// authenticated reports whether r carries an Authorization header.
func authenticated(r *http.Request) bool { return r.Header.Get("Authorization") != "" }

// estimateTokens is the default token estimate of the LLM presets: a
// quarter of the request body's length (OpenAI's rule of thumb of about 4
// characters of English per token), at least 1. It counts the prompt only,
// JSON syntax included, and nothing of the completion; a body of unknown
// length counts 1.
func estimateTokens(r *http.Request) int {
	if r.ContentLength <= 0 {
		return 1
	}
	return int(min(r.ContentLength/4+1, 1<<30))
}

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
	Key throttle.KeyFunc
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
	rule := func(name string, rate int, m throttle.Match, key throttle.KeyFunc) throttle.Rule {
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
	return Preset{
		Name: "stripe",
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

// GitHubConfig tunes [GitHubPreset]. The zero value describes a fleet
// calling api.github.com as one user or one app installation.
type GitHubConfig struct {
	// Host is the host the rules match. If empty, api.github.com. (GitHub
	// Enterprise Server's limits are set by its administrator: edit the
	// rules to match them.)
	Host string

	// Hourly is the primary limit of authenticated requests per hour. If
	// ≤ 0, 5,000 (a user or an app installation). GitHub gives 15,000 to
	// apps owned by an Enterprise Cloud organisation and up to 12,500 to
	// installations on many repositories.
	Hourly int

	// Key partitions every rule, for a fleet acting as several users or
	// installations, each with its own quota. If nil, all requests share
	// one set of buckets: GitHub counts per user or installation, not per
	// token, so partitioning by token would be wrong for two tokens of one
	// user, and for installation tokens, which expire every hour.
	Key throttle.KeyFunc
}

// GitHubPreset returns the limits of GitHub's REST API
// (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api,
// and the search docs):
//
//   - github-core: 5,000 authenticated requests/h (see
//     [GitHubConfig.Hourly]), burst 1 %, except search.
//   - github-search: 30 authenticated searches/min, except code search;
//     github-code-search: 10/min (changelog 2023-03-10).
//   - github-unauthenticated: 60 requests/h without an Authorization
//     header (GitHub counts them per IP address), and
//     github-unauthenticated-search: 10 searches/min.
//   - github-points: the secondary limit of 900 points/min, a GET, HEAD or
//     OPTIONS costing 1 point and any other method 5 (see [GitHubPoints]).
//     GitHub's page counts points per REST endpoint; the preset keeps one
//     bucket for all endpoints, the cautious reading, which binds before
//     github-core only for a fleet mutating more than 180 times a minute.
//   - github-content-per-minute and github-content-per-hour: the secondary
//     limits of 80 content-creating requests/min and 500/h. Which requests
//     create content is not listed; every POST and PUT counts here.
//
// GitHub's other secondary limits (100 concurrent requests, 90 s of CPU per
// minute) are not rates, and GitHub may change the secondary limits without
// notice: the dialect [GitHub] reads its 403/429 answers so the fleet
// pauses. GraphQL (/graphql) has its own points and is not matched.
func GitHubPreset(c GitHubConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.github.com"
	}
	hourly := c.Hourly
	if hourly <= 0 {
		hourly = 5000
	}
	rest := func(r *http.Request) bool { return r.URL.Path != "/graphql" }
	search := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/search/") }
	codeSearch := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/search/code") }
	rule := func(name string, rate int, per time.Duration, methods []string, f func(*http.Request) bool) throttle.Rule {
		return throttle.Rule{
			Name:  ruleName("github", name),
			Limit: throttle.Limit{Rate: rate, Period: per, Burst: burstOf(rate)},
			Match: throttle.Match{Host: host, Methods: methods, Func: func(r *http.Request) bool { return rest(r) && f(r) }},
			Key:   c.Key,
		}
	}
	points := rule("points", 900, time.Minute, nil, func(*http.Request) bool { return true })
	points.Cost = GitHubPoints
	points.Limit.Burst = max(points.Limit.Burst, 5)
	create := []string{http.MethodPost, http.MethodPut}
	return Preset{
		Name: "github",
		Rules: []throttle.Rule{
			rule("core", hourly, time.Hour, nil, func(r *http.Request) bool { return authenticated(r) && !search(r) }),
			rule("search", 30, time.Minute, nil, func(r *http.Request) bool { return authenticated(r) && search(r) && !codeSearch(r) }),
			rule("code-search", 10, time.Minute, nil, func(r *http.Request) bool { return authenticated(r) && codeSearch(r) }),
			rule("unauthenticated", 60, time.Hour, nil, func(r *http.Request) bool { return !authenticated(r) && !search(r) }),
			rule("unauthenticated-search", 10, time.Minute, nil, func(r *http.Request) bool { return !authenticated(r) && search(r) }),
			points,
			rule("content-per-minute", 80, time.Minute, create, func(*http.Request) bool { return true }),
			rule("content-per-hour", 500, time.Hour, create, func(*http.Request) bool { return true }),
		},
		Dialect: GitHub,
	}
}

// GitHubPoints is the cost of a request under GitHub's secondary limit on
// points: 1 for GET, HEAD and OPTIONS (and a request without a method,
// which is a GET), 5 for any other method.
func GitHubPoints(r *http.Request) int {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// TwilioConfig tunes [TwilioPreset]. The zero value describes Twilio's own
// host with the preset's default request rate.
type TwilioConfig struct {
	// Host is the host the rules match. If empty, api.twilio.com.
	Host string

	// Requests is the request rate per account. If its Rate is 0, 30
	// requests/s, burst 1: Twilio publishes no rate (see [TwilioPreset]).
	Requests throttle.Limit

	// Sender returns the sender ("From") of a request that sends a
	// message, or "" when unknown. If nil, the sender given to the
	// request's context by [WithTwilioSender] is used: the sender is a form
	// field of the body, which a rule must not read.
	Sender throttle.KeyFunc

	// Segments, if set, makes the per-sender rules count a message's
	// segments instead of messages, and raises their burst to 10 segments
	// so that a long message can ever be admitted (a message of more than
	// 10 segments then fails with a [*throttle.RuleError]). A sender may
	// then run up to 10 segments ahead of its rate, which Twilio queues.
	Segments throttle.CostFunc
}

// TwilioPreset returns the limits of Twilio's REST API and of its message
// senders:
//
//   - twilio-requests: requests per account (the AccountSid in the path).
//     Twilio limits concurrent requests per account, not their rate, and
//     publishes neither number (twilio.com/docs/api/errors/20429); third
//     parties say 100 concurrent requests (unconfirmed). The default of 30
//     requests/s is the preset's own cautious guess, chosen so that 100
//     concurrent requests are only reached by requests taking over 3 s;
//     override it with [TwilioConfig.Requests].
//   - twilio-long-code: 1 message/s per US long code sender (errors/21611,
//     30001; MMS too, changelog 2019-08-26).
//   - twilio-toll-free: 3 messages/s per US toll-free sender, the default;
//     high-throughput toll-free numbers get 25–150 (support article
//     4411046744987): edit the rule.
//   - twilio-short-code: 100 messages/s per short code ("100+").
//
// The per-sender rules match POST .../Messages.json and partition by the
// sender, which the caller names (see [TwilioConfig.Sender] and
// [WithTwilioSender]); a message whose sender is unknown, an alphanumeric
// sender ID, a WhatsApp or Messenger sender, or a Messaging Service without
// a From meets only twilio-requests. A sender of 3 to 8 digits without '+'
// is a short code; +1 followed by 800, 833, 844, 855, 866, 877 or 888 is
// toll-free; any other number starting with '+' is a long code. Above a
// sender's rate Twilio queues messages (up to 10 h of sending) rather than
// failing them; pacing at the rate keeps that queue empty.
//
// Twilio has no header dialect: its 429 (error 20429) names no wait.
func TwilioPreset(c TwilioConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.twilio.com"
	}
	requests := c.Requests
	if requests.Rate == 0 {
		requests = throttle.Limit{Rate: 30, Period: time.Second, Burst: 1}
	}
	sender := c.Sender
	if sender == nil {
		sender = twilioSenderFromContext
	}
	messages := throttle.Match{Host: host, Methods: []string{http.MethodPost}, Path: "/2010-04-01/Accounts/*/Messages.json"}
	perSender := func(name string, kind twilioSenderKind, rate int) throttle.Rule {
		m := messages
		m.Func = func(r *http.Request) bool { return classifyTwilioSender(sender(r)) == kind }
		l := throttle.Limit{Rate: rate, Period: time.Second, Burst: burstOf(rate)}
		if c.Segments != nil {
			l.Burst = max(l.Burst, maxTwilioSegments)
		}
		return throttle.Rule{Name: ruleName("twilio", name), Limit: l, Match: m, Key: sender, Cost: c.Segments}
	}
	return Preset{
		Name: "twilio",
		Rules: []throttle.Rule{
			{Name: "twilio-requests", Limit: requests, Match: throttle.Match{Host: host}, Key: twilioAccount},
			perSender("long-code", twilioLongCode, 1),
			perSender("toll-free", twilioTollFree, 3),
			perSender("short-code", twilioShortCode, 100),
		},
	}
}

// maxTwilioSegments is the burst of the per-sender rules when they count
// segments: a message body of Twilio's maximum of 1,600 characters is 10
// segments of 160 (unconfirmed by PROVIDERS research).
const maxTwilioSegments = 10

// twilioAccount returns the AccountSid of a Twilio REST path
// (/2010-04-01/Accounts/AC.../...), or "".
func twilioAccount(r *http.Request) string {
	_, rest, ok := strings.Cut(r.URL.Path, "/Accounts/")
	if !ok {
		return ""
	}
	sid, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(sid, ".json")
}

type twilioSenderKind int

const (
	twilioUnknown twilioSenderKind = iota
	twilioLongCode
	twilioTollFree
	twilioShortCode
)

// classifyTwilioSender tells a sender's kind from its form (see
// TwilioPreset).
func classifyTwilioSender(from string) twilioSenderKind {
	if n, ok := strings.CutPrefix(from, "+"); ok {
		if !allDigits(n) || len(n) < 4 {
			return twilioUnknown
		}
		if len(n) == 11 && n[0] == '1' {
			switch n[1:4] {
			case "800", "833", "844", "855", "866", "877", "888":
				return twilioTollFree
			}
		}
		return twilioLongCode
	}
	if allDigits(from) && len(from) >= 3 && len(from) <= 8 {
		return twilioShortCode
	}
	return twilioUnknown
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// twilioSenderKey is the context key of WithTwilioSender.
type twilioSenderKey struct{}

// WithTwilioSender returns a copy of ctx naming the sender ("From") of the
// message that a request made with it sends, for [TwilioPreset]'s
// per-sender rules:
//
//	req, err := http.NewRequestWithContext(providers.WithTwilioSender(ctx, from), "POST", url, body)
func WithTwilioSender(ctx context.Context, from string) context.Context {
	return context.WithValue(ctx, twilioSenderKey{}, from)
}

func twilioSenderFromContext(r *http.Request) string {
	s, _ := r.Context().Value(twilioSenderKey{}).(string)
	return s
}

// ShopifyPlan is a Shopify plan, which sets a store's API limits. The zero
// value is ShopifyStandard.
type ShopifyPlan int

// Shopify plans.
const (
	ShopifyStandard ShopifyPlan = iota
	ShopifyAdvanced
	ShopifyPlus
	ShopifyEnterprise
)

// shopifyLimits are a plan's REST rate and bucket and GraphQL points.
var shopifyLimits = [...]struct{ restRate, restBucket, points int }{
	ShopifyStandard:   {2, 40, 100},
	ShopifyAdvanced:   {4, 40, 200},
	ShopifyPlus:       {20, 80, 1000},
	ShopifyEnterprise: {40, 80, 2000},
}

// ShopifyConfig tunes [ShopifyPreset]. The zero value describes an app on
// stores of the Standard plan, calling the REST Admin API only.
type ShopifyConfig struct {
	// Plan is the stores' plan.
	Plan ShopifyPlan

	// Host is the host pattern the rules match. If empty, *.myshopify.com.
	Host string

	// Key partitions every rule. If nil, by store (the request's host):
	// Shopify counts per app and store.
	Key throttle.KeyFunc

	// GraphQLCost returns the points a GraphQL Admin API request will
	// cost: its calculated query cost, which only the caller can know
	// (from the query, or from extensions.cost of earlier answers). If nil,
	// the preset has no GraphQL rule: a cost of 1 per query would let far
	// too many through.
	GraphQLCost throttle.CostFunc
}

// ShopifyPreset returns the limits of Shopify's Admin APIs
// (shopify.dev/docs/api/admin-rest/usage/rate-limits and
// shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits):
//
//   - shopify-rest: the REST Admin API's leaky bucket per app and store:
//     2 requests/s for Standard stores, 4 Advanced, 20 Plus, 40 enterprise;
//     a bucket of 40 requests (Standard, Advanced; the docs' example). The
//     bucket of Plus and enterprise stores is unconfirmed (old sources say
//     80) and set to 80. The rule's Burst is the bucket less one second of
//     leak (38 for Standard), so that jitter at a full bucket does not
//     meet a 429.
//   - shopify-graphql (only with [ShopifyConfig.GraphQLCost]): 100
//     points/s Standard, 200 Advanced, 1,000 Plus, 2,000 enterprise. The
//     bucket is unconfirmed; it is set to 10 s of points, at least 1,000,
//     the largest cost of one query (unconfirmed).
//
// The rules match paths under /admin/, GraphQL being /admin/api/<version>
// /graphql.json. The dialect is [Shopify] (X-Shopify-Shop-Api-Call-Limit).
func ShopifyPreset(c ShopifyConfig) Preset {
	host := c.Host
	if host == "" {
		host = "*.myshopify.com"
	}
	key := c.Key
	if key == nil {
		key = throttle.KeyHost()
	}
	plan := c.Plan
	if plan < 0 || int(plan) >= len(shopifyLimits) {
		plan = ShopifyStandard
	}
	l := shopifyLimits[plan]
	graphql := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/graphql.json") }
	rules := []throttle.Rule{{
		Name:  "shopify-rest",
		Limit: throttle.Limit{Rate: l.restRate, Period: time.Second, Burst: max(1, l.restBucket-l.restRate)},
		Match: throttle.Match{Host: host, PathPrefix: "/admin/", Func: func(r *http.Request) bool { return !graphql(r) }},
		Key:   key,
	}}
	if c.GraphQLCost != nil {
		rules = append(rules, throttle.Rule{
			Name:  "shopify-graphql",
			Limit: throttle.Limit{Rate: l.points, Period: time.Second, Burst: max(1000, 10*l.points)},
			Match: throttle.Match{Host: host, PathPrefix: "/admin/", Func: graphql},
			Key:   key,
			Cost:  c.GraphQLCost,
		})
	}
	return Preset{Name: "shopify", Rules: rules, Dialect: Shopify}
}

// SlackTier is a rate-limit tier of Slack's Web API methods. The zero value
// means the default: [SlackTier2] where a tier is expected.
type SlackTier int

// Slack's tiers, each a number of calls per minute per method per
// workspace: 1, 20, 50 and 100 ("1+", "20+", ...: the floors).
const (
	SlackTier1 SlackTier = 1 + iota
	SlackTier2
	SlackTier3
	SlackTier4
)

// slackTierRates are the calls per minute of each tier.
var slackTierRates = [...]int{SlackTier1: 1, SlackTier2: 20, SlackTier3: 50, SlackTier4: 100}

// slackMethodTiers are the tiers the preset knows without being told:
// docs.slack.dev/reference/methods/conversations.history gives Tier 3 for
// Marketplace and internal apps (commercially distributed apps outside the
// Marketplace get 1 call/min since 2025-05-29: set SlackConfig.Methods to
// SlackTier1 for both).
var slackMethodTiers = map[string]SlackTier{
	"conversations.history": SlackTier3,
	"conversations.replies": SlackTier3,
}

// SlackConfig tunes [SlackPreset]. The zero value describes an app calling
// slack.com, one token per workspace, every method at Tier 2 but those the
// preset knows.
type SlackConfig struct {
	// Host is the host the rules match. If empty, slack.com.
	Host string

	// Key identifies the workspace (and app) of a request. If nil, the
	// Authorization header (hashed by the Transport): an app has one bot
	// token per workspace. Tokens sent in the form body are not seen.
	Key throttle.KeyFunc

	// Methods gives the tier of the methods you call ("users.info":
	// SlackTier4), from each method's reference page. It is consulted
	// before the few tiers the preset knows.
	Methods map[string]SlackTier

	// DefaultTier is the tier of a method neither Methods nor the preset
	// knows. If 0, Tier 2: the cautious choice, 20 calls/min.
	DefaultTier SlackTier
}

// SlackPreset returns the limits of Slack's Web API
// (api.slack.com/docs/rate-limits, docs.slack.dev/apis/web-api/rate-limits):
//
//   - slack-tier1 … slack-tier4: 1, 20, 50 and 100 calls/min per method per
//     workspace; each request meets the rule of its method's tier (see
//     [SlackConfig.Methods]).
//   - slack-post-message: chat.postMessage, about 1 message/s per channel.
//     The channel is a body field: name it with [WithSlackChannel], else
//     every message of a workspace shares one bucket of 1/s. Slack's
//     workspace-wide limit on top is unpublished.
//
// Slack answers 429 with Retry-After, which the Transport reads without a
// dialect.
func SlackPreset(c SlackConfig) Preset {
	host := c.Host
	if host == "" {
		host = "slack.com"
	}
	key := c.Key
	if key == nil {
		key = throttle.KeyHeader("Authorization")
	}
	def := c.DefaultTier
	if def < SlackTier1 || def > SlackTier4 {
		def = SlackTier2
	}
	// Methods is read at every request: copy it so that later changes to
	// the caller's map neither race nor change the rules.
	methods := make(map[string]SlackTier, len(c.Methods))
	for m, t := range c.Methods {
		methods[m] = t
	}
	tierOf := func(method string) SlackTier {
		if t, ok := methods[method]; ok && t >= SlackTier1 && t <= SlackTier4 {
			return t
		}
		if t, ok := slackMethodTiers[method]; ok {
			return t
		}
		return def
	}
	rules := make([]throttle.Rule, 0, 5)
	for t := SlackTier1; t <= SlackTier4; t++ {
		rate := slackTierRates[t]
		rules = append(rules, throttle.Rule{
			Name:  ruleName("slack", "tier"+string(rune('0'+t))),
			Limit: throttle.Limit{Rate: rate, Period: time.Minute, Burst: burstOf(rate)},
			Match: throttle.Match{Host: host, PathPrefix: "/api/", Func: func(r *http.Request) bool {
				m := slackMethod(r)
				return m != "chat.postMessage" && tierOf(m) == t
			}},
			Key: withKey(key, slackMethod),
		})
	}
	rules = append(rules, throttle.Rule{
		Name:  "slack-post-message",
		Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1},
		Match: throttle.Match{Host: host, Path: "/api/chat.postMessage"},
		Key:   withKey(key, slackChannelFromContext),
	})
	return Preset{Name: "slack", Rules: rules}
}

// slackMethod returns the Web API method of a request: the path after
// /api/.
func slackMethod(r *http.Request) string {
	return strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/"), "/")
}

// slackChannelKey is the context key of WithSlackChannel.
type slackChannelKey struct{}

// WithSlackChannel returns a copy of ctx naming the channel that a
// chat.postMessage request made with it posts to, for [SlackPreset]'s
// per-channel rule.
func WithSlackChannel(ctx context.Context, channel string) context.Context {
	return context.WithValue(ctx, slackChannelKey{}, channel)
}

func slackChannelFromContext(r *http.Request) string {
	s, _ := r.Context().Value(slackChannelKey{}).(string)
	return s
}

// DiscordConfig tunes [DiscordPreset]. The zero value describes bots
// calling discord.com.
type DiscordConfig struct {
	// Host is the host the rules match. If empty, discord.com.
	Host string

	// Key identifies the bot of a request. If nil, the Authorization header
	// ("Bot <token>", hashed by the Transport).
	Key throttle.KeyFunc
}

// DiscordPreset returns Discord's global limit
// (discord-api-docs docs/topics/rate-limits.md):
//
//   - discord-global: 50 requests/s per bot (per IP address without a
//     token), burst 1, for every request under /api/ except interaction
//     endpoints (paths with /interactions/), which are exempt.
//
// Discord's per-route limits are not published numbers ("don't hard-code
// limits"): the dialect [Discord] reads them from the headers, so the
// fleet pauses when a route's bucket is empty.
func DiscordPreset(c DiscordConfig) Preset {
	host := c.Host
	if host == "" {
		host = "discord.com"
	}
	key := c.Key
	if key == nil {
		key = throttle.KeyHeader("Authorization")
	}
	return Preset{
		Name: "discord",
		Rules: []throttle.Rule{{
			Name:  "discord-global",
			Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: burstOf(50)},
			Match: throttle.Match{Host: host, PathPrefix: "/api/", Func: func(r *http.Request) bool {
				return !strings.Contains(r.URL.Path, "/interactions/")
			}},
			Key: key,
		}},
		Dialect: Discord,
	}
}

// LLMConfig tunes [OpenAIPreset] and [AnthropicPreset]. Their limits depend
// on the account's usage tier and the model, so the caller gives them: the
// zero RPM is invalid, and [throttle.New] reports it naming the rule.
type LLMConfig struct {
	// RPM is the account's requests per minute for the model called.
	RPM int

	// TPM, if > 0, adds a rule of TPM tokens per minute: OpenAI's TPM, or
	// Anthropic's input tokens per minute (ITPM).
	TPM int

	// Tokens estimates the tokens a request counts against TPM. If nil, a
	// quarter of the body's length: a floor that counts the prompt only
	// (with its JSON) and none of the completion. Give your own estimate
	// (prompt tokens plus max_tokens) for anything better.
	Tokens throttle.CostFunc

	// Host is the host the rules match. If empty, the provider's API host.
	Host string

	// Key partitions every rule. If nil, all requests share the buckets:
	// limits are per organisation (and project), not per API key, so
	// partitioning by key would be wrong for two keys of one organisation.
	Key throttle.KeyFunc
}

// OpenAIPreset returns OpenAI's request and token limits for the numbers the
// caller gives (platform.openai.com/docs/guides/rate-limits: RPM and TPM are
// set per organisation, project, model and usage tier, and shown on the
// account's Limits page, not in the guide):
//
//   - openai-requests: c.RPM requests/min, burst one second's worth
//     (RPM/60, at least 1).
//   - openai-tokens (when c.TPM > 0): c.TPM tokens/min, each request
//     weighing its estimate (see [LLMConfig.Tokens]), burst c.TPM: OpenAI
//     replenishes continuously (its reset header is the time until the
//     quota is whole again), and any request that fits a minute's quota
//     must be admissible.
//
// OpenAI's daily limits (RPD, TPD) are not rules. The dialect is [OpenAI].
func OpenAIPreset(c LLMConfig) Preset {
	return llmPreset("openai", "api.openai.com", "tokens", c, OpenAI)
}

// AnthropicPreset returns Anthropic's request and input-token limits for
// the numbers the caller gives (docs.anthropic.com/en/api/rate-limits:
// requests, input and output tokens per minute, per model family and usage
// tier):
//
//   - anthropic-requests: c.RPM requests/min, burst RPM/60 (at least 1).
//   - anthropic-input-tokens (when c.TPM > 0): c.TPM input tokens/min
//     (ITPM), each request weighing its estimate, burst c.TPM.
//
// Output tokens per minute (OTPM) depend on the completion, unknown before
// the request, so the preset has no rule for them: append one with your
// own estimate (max_tokens, say) if you need it. The dialect [Anthropic]
// reads what is left of every quota from the headers.
func AnthropicPreset(c LLMConfig) Preset {
	return llmPreset("anthropic", "api.anthropic.com", "input-tokens", c, Anthropic)
}

func llmPreset(name, host, tokens string, c LLMConfig, d throttle.Dialect) Preset {
	if c.Host != "" {
		host = c.Host
	}
	m := throttle.Match{Host: host}
	rules := []throttle.Rule{{
		Name:  ruleName(name, "requests"),
		Limit: throttle.Limit{Rate: c.RPM, Period: time.Minute, Burst: max(1, c.RPM/60)},
		Match: m,
		Key:   c.Key,
	}}
	if c.TPM > 0 {
		cost := c.Tokens
		if cost == nil {
			cost = estimateTokens
		}
		rules = append(rules, throttle.Rule{
			Name:  ruleName(name, tokens),
			Limit: throttle.Limit{Rate: c.TPM, Period: time.Minute, Burst: c.TPM},
			Match: m,
			Key:   c.Key,
			Cost:  cost,
		})
	}
	return Preset{Name: name, Rules: rules, Dialect: d}
}
