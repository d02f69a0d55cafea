package providers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// ShopifyGraphQLCost reads the points a Shopify GraphQL Admin API request
// really cost from its answer's extensions.cost.actualQueryCost, for
// [throttle.Rule.ActualCost]: Shopify charges the requested (estimated)
// cost up front and refunds the difference once the query has run, and so
// does the preset's shopify-graphql rule with it. It reads at most the
// first 1 MiB of the body (the extensions come after data, so a larger
// answer reports nothing: ok false) and puts back a body that reads the
// same and closes the original. It is safe for concurrent use.
//
// Source: shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits (read
// 2026-11): "actualQueryCost", "requestedQueryCost", "throttleStatus".
func ShopifyGraphQLCost(resp *http.Response) (cost int, ok bool) {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return 0, false
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxShopifyCostBody+1))
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), c: resp.Body}
	if err != nil || len(buf) > maxShopifyCostBody {
		return 0, false
	}
	return parseShopifyCost(buf)
}

// maxShopifyCostBody bounds what ShopifyGraphQLCost reads of a body.
const maxShopifyCostBody = 1 << 20

// parseShopifyCost returns actualQueryCost from a GraphQL answer's JSON.
func parseShopifyCost(body []byte) (int, bool) {
	var v struct {
		Extensions struct {
			Cost struct {
				ActualQueryCost *float64 `json:"actualQueryCost"`
			} `json:"cost"`
		} `json:"extensions"`
	}
	if json.Unmarshal(body, &v) != nil || v.Extensions.Cost.ActualQueryCost == nil {
		return 0, false
	}
	c := *v.Extensions.Cost.ActualQueryCost
	if c != c || c < 0 || c > maxShopifyQueryCost {
		return 0, false
	}
	return int(c + 0.5), true
}

// maxShopifyQueryCost is above the largest cost Shopify lets one query
// have (1,000 points): a value beyond it is not Shopify's.
const maxShopifyQueryCost = 1 << 20

// readCloser reads from its Reader and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }
