package throttletest_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

func TestShopifyAnswers(t *testing.T) {
	h, fc := newHandler(t, throttletest.Shopify(throttletest.ShopifyConfig{}))
	const path = "/admin/api/2024-10/products.json"
	for i := 1; i <= 40; i++ {
		resp := serve(h, "GET", path, nil, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if got, want := resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"), strconv.Itoa(i)+"/40"; got != want {
			t.Fatalf("request %d: call limit %q, want %q", i, got, want)
		}
	}
	resp := serve(h, "GET", path, nil, "")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("41st: status %d, want 429", resp.StatusCode)
	}
	// Full, the bucket lets one more in half a second later (2/s).
	if got := resp.Header.Get("Retry-After"); got != "0.5" {
		t.Errorf("Retry-After %q, want 0.5", got)
	}
	if got := resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"); got != "40/40" {
		t.Errorf("call limit %q, want 40/40", got)
	}
	if e := decode(t, resp)["errors"]; e != "Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service." {
		t.Errorf("errors %q", e)
	}
	sig := header.Parse(resp.StatusCode, resp.Header, fc.Now(), 0, providers.Shopify)
	q, ok := sig.Quota("requests")
	if !sig.Limited || sig.RetryAfter != 500*time.Millisecond || !ok || q.Limit != 40 || q.Remaining != 0 {
		t.Errorf("the client reads %+v: want Limited, 0.5s, 0 of 40 left", sig)
	}
	fc.Advance(500 * time.Millisecond)
	if resp := serve(h, "GET", path, nil, ""); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Shopify-Shop-Api-Call-Limit") != "40/40" {
		t.Errorf("half a second later: status %d, call limit %q; want 200, 40/40", resp.StatusCode, resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"))
	}
	fc.Advance(10 * time.Second) // 20 leak out
	if resp := serve(h, "GET", path, nil, ""); resp.Header.Get("X-Shopify-Shop-Api-Call-Limit") != "21/40" {
		t.Errorf("10 s later: call limit %q, want 21/40", resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"))
	}
	// GraphQL meets no rule and carries no REST header.
	if resp := serve(h, "POST", "/admin/api/2024-10/graphql.json", nil, ""); resp.Header.Get("X-Shopify-Shop-Api-Call-Limit") != "" {
		t.Error("GraphQL answered with the REST call limit")
	}
	// Another store has its own bucket.
	r := serve(hostHandler{h, "other.myshopify.com"}, "GET", path, nil, "")
	if got := r.Header.Get("X-Shopify-Shop-Api-Call-Limit"); got != "1/40" {
		t.Errorf("another store: call limit %q, want 1/40", got)
	}
}

// hostHandler sets the Host of every request before h sees it.
type hostHandler struct {
	h    http.Handler
	host string
}

func (x hostHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Host = x.host
	x.h.ServeHTTP(w, r)
}
