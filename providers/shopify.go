package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

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
	Key func(*http.Request) string

	// GraphQLCost returns the points a GraphQL Admin API request will
	// cost: its calculated query cost, which only the caller can know
	// (from the query, or from extensions.cost of earlier answers). If nil,
	// the preset has no GraphQL rule: a cost of 1 per query would let far
	// too many through.
	GraphQLCost func(*http.Request) int
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
//     the largest cost of one query (unconfirmed). A query is booked at
//     its estimate and the difference from its actualQueryCost refunded
//     (or charged), as Shopify does (see [ShopifyGraphQLCost]).
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
		key = storeKey
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
			// Shopify refunds what a query did not use: so does the
			// bucket.
			ActualCost: ShopifyGraphQLCost,
		})
	}
	return Preset{Name: shopifyName, Rules: rules, Dialect: Shopify}
}

// Shopify reads X-Shopify-Shop-Api-Call-Limit ("32/40": requests used /
// bucket size, REST Admin API leaky bucket) into the quota "requests"
// (Limit 40, Remaining 8). Shopify's 429 carries "Retry-After: 2.0"
// (fractional seconds), which header.Parse reads itself. It names itself
// "shopify" in header.Signal.Dialect when it read the call limit.
//
// Source: shopify.dev/docs/api/admin-rest/usage/rate-limits.
var Shopify header.Dialect = header.DialectFunc(parseShopify)

// shopifyCallLimit is the canonical key of the field the Shopify dialect
// reads.
var shopifyCallLimit = http.CanonicalHeaderKey("X-Shopify-Shop-Api-Call-Limit")

func parseShopify(_ int, h http.Header, _ time.Time, s *header.Signal) {
	used, size, ok := ParseUsedOfLimit(value(h, shopifyCallLimit))
	if !ok {
		return
	}
	s.SetQuota(header.Quota{
		Name: "requests", Unit: "requests",
		Limit: size, HasLimit: true,
		Remaining: max(size-used, 0), HasRemaining: true,
	})
	s.Dialect = shopifyName
}

// storeKey partitions by the request's host, which names the store:
// Shopify counts per app and store. Hosts compare without case.
func storeKey(r *http.Request) string { return strings.ToLower(r.URL.Host) }
