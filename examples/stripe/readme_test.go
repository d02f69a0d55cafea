package main

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stripe/stripe-go/v82"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

// TestREADMEClient builds the README's first stripe-go client, so that the
// snippet keeps compiling against the SDK and the preset; it sends
// nothing. Its Redis address is a closed port, not the README's
// localhost:6379, which tests never touch.
func TestREADMEClient(t *testing.T) {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}})
	defer func() { _ = rdb.Close() }()
	preset := providers.StripePreset(providers.StripeConfig{Test: true}) // test mode: 25 requests/s; live: 100
	tr := throttle.NewTransport(nil, append(preset.Options(), throttle.WithRedis(rdb))...)
	defer func() { _ = tr.Close() }()
	hc := &http.Client{Transport: tr}
	sc := stripe.NewClient("sk_test_readme", stripe.WithBackends(
		stripe.NewBackendsWithConfig(&stripe.BackendConfig{HTTPClient: hc})))
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	if sc.V1Customers == nil {
		t.Fatal("no customer service")
	}
}
