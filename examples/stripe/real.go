package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/throttlekit/throttle/examples/internal/exrun"
	"github.com/throttlekit/throttle/providers"
)

// errNotTestKey is returned for a key that is not a test-mode key: the
// example never calls Stripe's live mode.
var errNotTestKey = errors.New("STRIPE_KEY must hold a test-mode key (sk_test_… or rk_test_…)")

// runReal runs the throttled phase against api.stripe.com with key, with
// the preset's test-mode limits and read-only calls.
func runReal(ctx context.Context, cfg config, key string) error {
	if !strings.HasPrefix(key, "sk_test_") && !strings.HasPrefix(key, "rk_test_") {
		return errNotTestKey
	}
	preset := providers.StripePreset(providers.StripeConfig{Test: true})
	throttled, err := exrun.OpenReal(cfg.RedisURL, "example-stripe-real", preset.Options()...)
	if err != nil {
		return err
	}
	defer throttled.Close()
	sc := newClient(key, "", &http.Client{Transport: throttled.Transport})
	if _, err := fmt.Fprintf(cfg.Out, "%d workers call api.stripe.com in test mode for %v (25 requests/s); store: %s.\n", cfg.Workers, cfg.Duration, throttled.StoreDesc); err != nil {
		return err
	}
	s, err := exrun.Run(ctx, exrun.Phase{
		Name: "api.stripe.com, throttled", Duration: cfg.Duration, Quota: 25, Workers: cfg.Workers,
		Server: throttled.Counted, Meter: throttled.Meter, Out: cfg.Out, TTY: cfg.TTY,
	}, func(ctx context.Context, w, n int) error {
		var err error
		if n%2 == 0 {
			_, err = sc.V1Balance.Retrieve(ctx, nil)
		} else {
			for _, e := range sc.V1Customers.List(ctx, &stripe.CustomerListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(1)}}) {
				err = e
				break
			}
		}
		return expected(err)
	})
	if err != nil {
		return err
	}
	if s.Limited > 0 {
		return fmt.Errorf("api.stripe.com answered %d requests 429", s.Limited)
	}
	return nil
}
