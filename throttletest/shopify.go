package throttletest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// ShopifyConfig tunes [Shopify]. The zero value is a store on the
// Standard plan: a bucket of 40 requests draining 2 a second.
type ShopifyConfig struct {
	// Rate is the requests per second the bucket drains. If ≤ 0, 2
	// (Standard; Advanced 4, Plus 20, enterprise 40).
	Rate int

	// Bucket is the bucket's size. If ≤ 0, 40 (Standard and Advanced;
	// Plus and enterprise, unconfirmed, 80).
	Bucket int
}

// ShopifyREST is the name of the Shopify profile's rule.
const ShopifyREST = "shopify-rest"

// Shopify returns a simulated Shopify REST Admin API
// (shopify.dev/docs/api/admin-rest/usage/rate-limits, read 2026-11):
// shopify-rest, a leaky bucket per store (the request's Host) of Bucket
// requests draining Rate a second, over the paths under /admin/ but
// GraphQL's (/admin/api/<version>/graphql.json, which meets no rule).
//
// Every answer under /admin/ carries X-Shopify-Shop-Api-Call-Limit: the
// requests in the bucket (rounded up) over its size, "32/40". Over it,
// status 429 with Retry-After in fractional seconds, as Shopify sends it
// ("2.0"; here the time until one request fits, rounded up to a tenth),
// and the body {"errors":"Exceeded 2 calls per second for api client.
// Reduce request rates to resume uninterrupted service."}. During a
// [Handler.Pause] the same 429 with the pause's rest. An admitted request
// is answered 200 with "{}".
func Shopify(c ShopifyConfig) Profile {
	rate, bucket := c.Rate, c.Bucket
	if rate <= 0 {
		rate = 2
	}
	if bucket <= 0 {
		bucket = 40
	}
	return Profile{
		Name: "shopify",
		Rules: []throttle.Rule{{
			Name:  ShopifyREST,
			Limit: throttle.Limit{Rate: rate, Period: time.Second, Burst: bucket},
			Match: throttle.Match{PathPrefix: "/admin/", Func: func(r *http.Request) bool {
				return !strings.HasSuffix(r.URL.Path, "/graphql.json")
			}},
			Key: func(r *http.Request) string { return strings.ToLower(requestHost(r)) },
		}},
		Answer: func(_ *http.Request, d Decision) Answer {
			var a Answer
			if d.Admitted {
				a = jsonAnswer(http.StatusOK, struct{}{})
			} else {
				a = jsonAnswer(http.StatusTooManyRequests, map[string]string{
					"errors": fmt.Sprintf("Exceeded %d calls per second for api client. Reduce request rates to resume uninterrupted service.", rate),
				})
				tenths := max(1, math.Ceil(d.Wait.Seconds()*10))
				a.Header.Set("Retry-After", strconv.FormatFloat(tenths/10, 'f', 1, 64))
			}
			if q, ok := d.Quota(ShopifyREST); ok {
				a.Header.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", q.Used, q.Size))
			}
			return a
		},
	}
}

// requestHost is the host a request was sent to: its Host header, as the
// middleware reads it, else its URL's (a request made for
// WithOutsideConsumer without a Host).
func requestHost(r *http.Request) string {
	if r.Host != "" || r.URL == nil {
		return r.Host
	}
	return r.URL.Host
}
