package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exredis"
	"github.com/throttlekit/throttle/examples/internal/exrun"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// run runs the fleet twice against a fresh local API each time, without
// the throttle and then with it, and prints what it did to cfg.Out.
func run(ctx context.Context, cfg config) (result, error) {
	if cfg.Replicas < 1 || cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Rate < 1 {
		return result{}, errors.New("replicas, workers, duration and rate must be positive")
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%d replicas × %d workers call a local Stripe-like API through stripe-go for %v per phase:\n", cfg.Replicas, cfg.Workers, cfg.Duration)
	fmt.Fprintf(&head, "%d requests/s per account and 25/s per endpoint, strict 1 s windows.\n", cfg.Rate)
	var res result
	var err error
	res.Without, res.With, err = exrun.RunPhases(ctx, cfg.Out, cfg.RedisURL, head.String(), func(ctx context.Context, store *exredis.Store) (exrun.Summary, error) {
		return phase(ctx, cfg, store)
	})
	return res, err
}

// phase runs the fleet once against a fresh local API: each replica's
// stripe.Client on a plain http.Client when store is nil, else on a
// throttle.Transport whose buckets live in store.
func phase(ctx context.Context, cfg config, store *exredis.Store) (exrun.Summary, error) {
	// The simulated Stripe (live mode: 100 requests/s per account, 25/s
	// per endpoint, strict sliding logs), its global rate set to -rate.
	profile := throttletest.Stripe(throttletest.StripeConfig{})
	for i := range profile.Rules {
		if profile.Rules[i].Name == throttletest.StripeGlobal {
			profile.Rules[i].Limit.Rate = cfg.Rate
		}
	}
	srv, err := throttletest.NewServer(profile)
	if err != nil {
		return exrun.Summary{}, err
	}
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// The preset, pointed at the local server, with its global rate set to
	// the API's quota: presets are plain rules, edited like any value.
	preset := providers.StripePreset(providers.StripeConfig{Hosts: []string{host}})
	preset.Rule("stripe-global").Limit.Rate = cfg.Rate
	// A namespace of its own, so that runs never share buckets in a real
	// Redis, and stale buckets of an earlier run never slow this one.
	ns := fmt.Sprintf("example-stripe-%d-%d", os.Getpid(), time.Now().UnixNano())

	name := "without the throttle"
	meter := &exrun.Meter{}
	clients := make([]*stripe.Client, cfg.Replicas)
	for i := range clients {
		base := &http.Transport{MaxIdleConnsPerHost: cfg.Workers}
		defer base.CloseIdleConnections()
		var rt http.RoundTripper = base
		if store != nil {
			name = "with the throttle   "
			rdb := store.Client()
			defer func() { _ = rdb.Close() }()
			t, err := throttle.New(base, slices.Concat(preset.Options(), store.Options(rdb, ns),
				[]throttle.Option{throttle.WithHeadroom(cfg.Headroom), throttle.WithObserver(meter)})...)
			if err != nil {
				return exrun.Summary{}, fmt.Errorf("replica %d: %w", i+1, err)
			}
			defer func() { _ = t.Close() }()
			rt = t
		}
		clients[i] = newClient("sk_test_example", srv.URL, &http.Client{Transport: rt})
	}
	return exrun.Run(ctx, exrun.Phase{
		Name: name, Duration: cfg.Duration, Quota: float64(cfg.Rate), Workers: cfg.Replicas * cfg.Workers,
		Server: exrun.Simulated{S: srv}, Meter: meter, Out: cfg.Out, TTY: cfg.TTY,
	}, func(ctx context.Context, w, n int) error {
		return call(ctx, clients[w/cfg.Workers], w, n)
	})
}

// newClient returns a stripe.Client with key whose requests go to url (a
// local server, or "" for api.stripe.com) through hc: the place where a
// throttled http.Client goes. The SDK's own retries are off, as the
// Transport retries rate-limited answers itself and no other failure is
// expected here, and so is its logging.
func newClient(key, url string, hc *http.Client) *stripe.Client {
	cfg := &stripe.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if url != "" {
		cfg.URL = stripe.String(url)
	}
	return stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(cfg)))
}

// call makes one call, picked at random among six endpoints, as a worker
// creating customers and charging them would. A 429 is the server's to
// count and not an error; nor is a slot the Transport refused because it
// lay beyond the phase's end.
func call(ctx context.Context, sc *stripe.Client, worker, n int) error {
	rng := rand.New(rand.NewPCG(uint64(worker), uint64(n))) // the same mix every run
	id := fmt.Sprintf("%d%05d", worker, n)
	var err error
	switch rng.IntN(6) {
	case 0:
		_, err = sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("jenny+" + id + "@example.com")})
	case 1:
		_, err = sc.V1Customers.Retrieve(ctx, "cus_"+id, nil)
	case 2:
		p := &stripe.CustomerUpdateParams{}
		p.AddMetadata("order", id)
		_, err = sc.V1Customers.Update(ctx, "cus_"+id, p)
	case 3:
		_, err = sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd")})
	case 4:
		_, err = sc.V1PaymentIntents.Confirm(ctx, "pi_"+id, nil)
	case 5:
		for _, e := range sc.V1Charges.List(ctx, &stripe.ChargeListParams{}) {
			err = e
			break // one page is enough
		}
	}
	return expected(err)
}

// expected returns nil for the errors a phase expects: a 429 (the server
// counts it) and a slot beyond the phase's end.
func expected(err error) error {
	var se *stripe.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.HTTPStatusCode == http.StatusTooManyRequests:
		return nil
	case errors.Is(err, throttle.ErrBeyondDeadline):
		return exrun.ErrStop
	}
	return err
}
