package providers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/throttlekit/throttle/providers"
)

func TestShopifyGraphQLCost(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		cost       int
		ok         bool
	}{
		{"shopify's answer", `{"data":{"shop":{"name":"x"}},"extensions":{"cost":{"requestedQueryCost":101,"actualQueryCost":46,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":954,"restoreRate":50.0}}}}`, 46, true},
		{"fractional", `{"extensions":{"cost":{"actualQueryCost":2.6}}}`, 3, true},
		{"zero", `{"extensions":{"cost":{"actualQueryCost":0}}}`, 0, true},
		{"no extensions", `{"data":{}}`, 0, false},
		{"negative", `{"extensions":{"cost":{"actualQueryCost":-5}}}`, 0, false},
		{"huge", `{"extensions":{"cost":{"actualQueryCost":1e300}}}`, 0, false},
		{"not json", `<html>`, 0, false},
		{"empty", ``, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(tc.body))}
			cost, ok := providers.ShopifyGraphQLCost(resp)
			if cost != tc.cost || ok != tc.ok {
				t.Errorf("cost %d, %v; want %d, %v", cost, ok, tc.cost, tc.ok)
			}
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.body {
				t.Errorf("the body reads %q after, want it unchanged", b)
			}
		})
	}
	t.Run("a body over 1 MiB is left whole and tells nothing", func(t *testing.T) {
		big := `{"data":"` + strings.Repeat("x", 1<<20) + `","extensions":{"cost":{"actualQueryCost":1}}}`
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(big))}
		if _, ok := providers.ShopifyGraphQLCost(resp); ok {
			t.Error("read a cost past the limit")
		}
		if b, _ := io.ReadAll(resp.Body); len(b) != len(big) {
			t.Errorf("the body reads %d bytes after, want %d", len(b), len(big))
		}
	})
}

func FuzzShopifyGraphQLCost(f *testing.F) {
	f.Add(`{"extensions":{"cost":{"actualQueryCost":46}}}`)
	f.Add(`{"extensions":{"cost":{"actualQueryCost":"x"}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(body))}
		cost, ok := providers.ShopifyGraphQLCost(resp)
		if cost < 0 || cost > 1<<20 || (!ok && cost != 0) {
			t.Fatalf("cost %d, %v from %q", cost, ok, body)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != body {
			t.Fatalf("body changed")
		}
	})
}
