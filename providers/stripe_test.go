package providers_test

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestStripePreset(t *testing.T) {
	ctx := context.Background()
	stripe := providers.StripePreset(providers.StripeConfig{})
	s := time.Second
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"stripe live", stripe, map[string]throttle.Limit{
				"stripe-global": lim(100, s, 1), "stripe-endpoint": lim(25, s, 1), "stripe-files-read": lim(20, s, 1),
				"stripe-files-write": lim(20, s, 1), "stripe-search": lim(20, s, 1), "stripe-meter-events": lim(1000, s, 10),
			}},
			{"stripe test", providers.StripePreset(providers.StripeConfig{Test: true}), map[string]throttle.Limit{
				"stripe-global": lim(25, s, 1), "stripe-endpoint": lim(25, s, 1),
			}},
		})
	})
	t.Run("concurrency", func(t *testing.T) {
		if stripe.Rule("stripe-concurrency") != nil {
			t.Error("a concurrency rule by default; Stripe publishes no number")
		}
		p := providers.StripePreset(providers.StripeConfig{Concurrency: 20})
		if r := p.Rule("stripe-concurrency"); r == nil || r.Concurrency != 20 {
			t.Errorf("stripe-concurrency: %+v, want a cap of 20", r)
		}
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"stripe create customer", stripe, newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "name=x"), []string{"stripe-global", "stripe-endpoint"}},
			{"stripe host with port", stripe, newReq(ctx, "GET", "https://api.stripe.com:443/v1/charges", ""), []string{"stripe-global", "stripe-endpoint"}},
			{"stripe search", stripe, newReq(ctx, "GET", "https://api.stripe.com/v1/customers/search?query=x", ""), []string{"stripe-global", "stripe-endpoint", "stripe-search"}},
			{"stripe file upload", stripe, newReq(ctx, "POST", "https://files.stripe.com/v1/files", "f"), []string{"stripe-global", "stripe-endpoint", "stripe-files-write"}},
			{"stripe file read", stripe, newReq(ctx, "GET", "https://api.stripe.com/v1/files/file_1Mr4", ""), []string{"stripe-global", "stripe-endpoint", "stripe-files-read"}},
			{"stripe meter event", stripe, newReq(ctx, "POST", "https://api.stripe.com/v1/billing/meter_events", "e"), []string{"stripe-meter-events"}},
			{"stripe v2 meter event stream", stripe, newReq(ctx, "POST", "https://meter-events.stripe.com/v2/billing/meter_event_stream", "e"), []string{"stripe-meter-events"}},
			{"stripe other host", stripe, newReq(ctx, "GET", "https://api.github.com/v1/customers", ""), nil},
		})
	})
	t.Run("host override", func(t *testing.T) {
		p := providers.StripePreset(providers.StripeConfig{Hosts: []string{"127.0.0.1:8080"}})
		if got := matched(t, p, newReq(ctx, "POST", "http://127.0.0.1:8080/v1/customers", "x")); len(got) != 2 {
			t.Errorf("fake host: matched %v, want global and endpoint", got)
		}
		if got := matched(t, p, newReq(ctx, "POST", "http://127.0.0.1:9090/v1/customers", "x")); got != nil {
			t.Errorf("other port: matched %v, want none", got)
		}
	})
	t.Run("keys", func(t *testing.T) {
		perAccount := providers.StripePreset(providers.StripeConfig{Key: throttle.KeyHeader("Authorization")})
		checkKeys(t, []keyCase{
			{"stripe endpoint: IDs normalised", stripe, "stripe-endpoint",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_123", "x"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_456", "x"), true},
			{"stripe endpoint: method counts", stripe, "stripe-endpoint",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_123", "x"), newReq(ctx, "GET", "https://api.stripe.com/v1/customers/cus_123", ""), false},
			{"stripe endpoint: paths differ", stripe, "stripe-endpoint",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x"), newReq(ctx, "POST", "https://api.stripe.com/v1/charges", "x"), false},
			{"stripe global: one bucket", stripe, "stripe-global",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/charges", "x", "Authorization", "Bearer sk_b"), true},
			{"stripe global: per account with Key", perAccount, "stripe-global",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_b"), false},
			{"stripe endpoint: per account with Key", perAccount, "stripe-endpoint",
				newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_b"), false},
		})
	})
}

func TestStripeEndpoint(t *testing.T) {
	tests := []struct{ method, path, want string }{
		{"POST", "/v1/customers", "POST /v1/customers"},
		{"POST", "/v1/customers/cus_123", "POST /v1/customers/{id}"},
		{"GET", "/v1/customers/cus_NffrFeUfNV2Hib/", "GET /v1/customers/{id}"},
		{"", "/v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/confirm", "GET /v1/payment_intents/{id}/confirm"},
		{"DELETE", "/v1/customers/cus_1/tax_ids/txi_2", "DELETE /v1/customers/{id}/tax_ids/{id}"},
		{"GET", "/v1/customers/search", "GET /v1/customers/search"},
		{"GET", "/v1/checkout/sessions/cs_test_a1b2", "GET /v1/checkout/sessions/{id}"},
		{"GET", "/v1/country_specs/US", "GET /v1/country_specs/{id}"},
		{"GET", "/v1/products/gold-plan", "GET /v1/products/{id}"},
		{"GET", "/v1/products/premium", "GET /v1/products/premium"}, // documented limit
		{"GET", "/v2/core/events/evt_1", "GET /v2/core/events/{id}"},
		{"GET", "/", "GET "},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := providers.StripeEndpoint(tt.method, tt.path); got != tt.want {
				t.Errorf("StripeEndpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStripeDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "stripe 429 reason", dialect: providers.Stripe, status: 429,
			h:    hdr("Stripe-Rate-Limited-Reason", "endpoint-concurrency", "Stripe-Should-Retry", "false"),
			want: header.Signal{Limited: true, Reason: "endpoint-concurrency", ShouldRetry: header.RetryHintDoNotRetry, Concurrent: true, Dialect: "stripe"},
		},
		{
			name: "stripe should-retry true", dialect: providers.Stripe, status: 409,
			h:    hdr("Stripe-Should-Retry", "true"),
			want: header.Signal{ShouldRetry: header.RetryHintRetry, Dialect: "stripe"},
		},
	})
}
