package providers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestShopifyPreset(t *testing.T) {
	ctx := context.Background()
	s := time.Second
	cost := func(*http.Request) int { return 1 }
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"shopify standard", providers.ShopifyPreset(providers.ShopifyConfig{GraphQLCost: cost}), map[string]throttle.Limit{
				"shopify-rest": lim(2, s, 38), "shopify-graphql": lim(100, s, 1000),
			}},
			{"shopify advanced", providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyAdvanced}), map[string]throttle.Limit{
				"shopify-rest": lim(4, s, 36),
			}},
			{"shopify plus", providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyPlus, GraphQLCost: cost}), map[string]throttle.Limit{
				"shopify-rest": lim(20, s, 60), "shopify-graphql": lim(1000, s, 10000),
			}},
		})
	})
	t.Run("optional rules absent", func(t *testing.T) {
		checkAbsent(t, providers.ShopifyPreset(providers.ShopifyConfig{}), "shopify-graphql")
	})
	t.Run("matches", func(t *testing.T) {
		gql := func(*http.Request) int { return 10 }
		shopify := providers.ShopifyPreset(providers.ShopifyConfig{GraphQLCost: gql})
		checkMatches(t, []matchCase{
			{"shopify rest", shopify, newReq(ctx, "GET", "https://shop1.myshopify.com/admin/api/2024-10/products.json", ""), []string{"shopify-rest"}},
			{"shopify graphql", shopify, newReq(ctx, "POST", "https://shop1.myshopify.com/admin/api/2024-10/graphql.json", "{}"), []string{"shopify-graphql"}},
			{"shopify storefront", shopify, newReq(ctx, "GET", "https://shop1.myshopify.com/products.json", ""), nil},
		})
	})
	t.Run("keys", func(t *testing.T) {
		shopify := providers.ShopifyPreset(providers.ShopifyConfig{})
		checkKeys(t, []keyCase{
			{"shopify: per store", shopify, "shopify-rest",
				newReq(ctx, "GET", "https://a.myshopify.com/admin/api/2024-10/products.json", ""), newReq(ctx, "GET", "https://b.myshopify.com/admin/api/2024-10/products.json", ""), false},
			{"shopify: a store's host without case", shopify, "shopify-rest",
				newReq(ctx, "GET", "https://a.myshopify.com/admin/api/2024-10/products.json", ""), newReq(ctx, "GET", "https://A.myshopify.com/admin/api/2024-10/products.json", ""), true},
		})
	})
}

func TestShopifyDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "shopify bucket", dialect: providers.Shopify, status: 200,
			h:    hdr("X-Shopify-Shop-Api-Call-Limit", "32/40"),
			want: header.Signal{Dialect: "shopify", Quotas: []header.Quota{{Name: "requests", Unit: "requests", Limit: 40, HasLimit: true, Remaining: 8, HasRemaining: true}}},
		},
		{
			name: "shopify 429 float retry-after, overfull bucket", dialect: providers.Shopify, status: 429,
			h: hdr("X-Shopify-Shop-Api-Call-Limit", "41/40", "Retry-After", "2.0"),
			want: header.Signal{Limited: true, RetryAfter: 2 * time.Second, HasRetryAfter: true, Dialect: "shopify",
				Quotas: []header.Quota{{Name: "requests", Unit: "requests", Limit: 40, HasLimit: true, Remaining: 0, HasRemaining: true}}},
		},
		{
			name: "shopify garbled", dialect: providers.Shopify, status: 200,
			h:    hdr("X-Shopify-Shop-Api-Call-Limit", "32/-40"),
			want: header.Signal{},
		},
	})
}

func FuzzShopifyCallLimit(f *testing.F) {
	for _, s := range []string{"32/40", "1/40", "41/40", "/", "-1/40", "99999999999999999999/1", "1/2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		s := header.Parse(200, http.Header{"X-Shopify-Shop-Api-Call-Limit": {v}}, time.Unix(0, 0), time.Minute, providers.Shopify)
		checkDialectSignal(t, s, time.Minute)
		if q, ok := s.Quota("requests"); ok && q.Remaining > q.Limit {
			t.Fatalf("remaining above size: %v", q)
		}
	})
}
