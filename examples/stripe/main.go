// Command stripe runs a simulated fleet of worker replicas against a local
// Stripe-like API that enforces its quota strictly, and shows that the
// replicas, each with its own throttle.Transport, share the quota through
// Redis: they use nearly all of it and meet no 429.
//
//	go run ./examples/stripe                       # embedded Redis (miniredis)
//	go run ./examples/stripe -redis redis://localhost:6379/0
//
// The API is an httptest server allowing 100 requests/s per account over a
// strict one-second sliding window, and 25 requests/s per endpoint, and
// answering 429 with Stripe-Rate-Limited-Reason like Stripe. The replicas
// use providers.StripePreset, pointed at the local server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/fakeapi"
	"github.com/throttlekit/throttle/providers"
)

// config is what the flags set.
type config struct {
	Replicas int           // worker replicas, each with its own Transport and Redis client
	Workers  int           // concurrent workers per replica
	Duration time.Duration // how long the fleet runs
	Rate     int           // the API's global quota in requests/s, and the preset's
	RedisURL string        // a real Redis; empty means an embedded miniredis
	Headroom float64       // throttle.WithHeadroom
}

// result is what a run measured.
type result struct {
	Store    string // where the buckets lived
	Replicas []replicaStats
	Elapsed  time.Duration
	Admitted int   // requests the server answered 200
	Limited  int64 // requests the server answered 429
	Global   int64 // of which over the global rate
	MaxIn1s  int   // most requests the server admitted in any 1 s window
	Rate     int   // the quota
}

type replicaStats struct{ Sent, OK, Limited, Failed int64 }

// Utilisation is the fraction of the quota the fleet used.
func (r result) Utilisation() float64 {
	return float64(r.Admitted) / (r.Elapsed.Seconds() * float64(r.Rate))
}

// OK reports whether the run met its promise: no 429 and at least 90 % of
// the quota used.
func (r result) OK() bool { return r.Limited == 0 && r.Utilisation() >= 0.9 }

func main() {
	var cfg config
	flag.IntVar(&cfg.Replicas, "replicas", 4, "worker replicas, each with its own throttle.Transport and Redis client")
	flag.IntVar(&cfg.Workers, "workers", 8, "concurrent workers per replica")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long the fleet runs")
	flag.IntVar(&cfg.Rate, "rate", 100, "the API's global quota in requests/s (Stripe live mode: 100)")
	flag.Float64Var(&cfg.Headroom, "headroom", 0.05, "fraction of the quota kept in reserve against jitter (library default 0.02)")
	flag.StringVar(&cfg.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL; empty: an embedded miniredis)")
	flag.Parse()

	res, err := run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stripe example:", err)
		os.Exit(1)
	}
	if !res.OK() {
		os.Exit(1)
	}
}

// run runs the fleet against a fresh fake API and prints what it did to out.
func run(ctx context.Context, cfg config, out io.Writer) (result, error) {
	if cfg.Replicas < 1 || cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Rate < 1 {
		return result{}, errors.New("replicas, workers, duration and rate must be positive")
	}
	api := fakeapi.NewStripe(cfg.Rate, 25)
	srv := httptest.NewServer(api)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// The preset, pointed at the local server, with its global rate set to
	// the API's quota: presets are plain rules, edited like any value.
	preset := providers.StripePreset(providers.StripeConfig{Hosts: []string{host}})
	preset.Rule("stripe-global").Limit.Rate = cfg.Rate
	// Six endpoints share the global quota here, and the core books a
	// request in all of its buckets at one departure time: a request
	// whose endpoint bucket is further ahead than the global one leaves
	// the global bucket idle until then. A burst of 5 per endpoint absorbs
	// the moments when several workers pick the same endpoint.
	preset.Rule("stripe-endpoint").Limit.Burst = 5

	newClient, store, closeRedis, err := redisClients(cfg.RedisURL)
	if err != nil {
		return result{}, err
	}
	defer closeRedis()
	// A namespace of its own, so that runs never share buckets in a real
	// Redis, and stale buckets of an earlier run never slow this one.
	ns := fmt.Sprintf("example-stripe-%d-%d", os.Getpid(), time.Now().UnixNano())

	counters := make([]*fakeapi.Counting, cfg.Replicas)
	clients := make([]*http.Client, cfg.Replicas)
	for i := range clients {
		base := &http.Transport{MaxIdleConnsPerHost: cfg.Workers}
		defer base.CloseIdleConnections()
		counters[i] = &fakeapi.Counting{Base: base}
		rdb := newClient()
		defer func() { _ = rdb.Close() }()
		t, err := throttle.New(counters[i], append(preset.Options(),
			throttle.WithRedis(rdb), throttle.WithNamespace(ns), throttle.WithHeadroom(cfg.Headroom))...)
		if err != nil {
			return result{}, fmt.Errorf("replica %d: %w", i+1, err)
		}
		clients[i] = &http.Client{Transport: t}
	}

	fmt.Fprintf(out, "A fleet of %d replicas × %d workers creates customers and payment intents for %v\n", cfg.Replicas, cfg.Workers, cfg.Duration)
	fmt.Fprintf(out, "against a local Stripe-like API allowing %d requests/s (strict 1 s sliding window) and 25/s per endpoint.\n", cfg.Rate)
	fmt.Fprintf(out, "Each replica has its own throttle.Transport (providers.StripePreset, headroom %.0f %%); buckets shared in %s.\n\n", 100*cfg.Headroom, store)

	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(cfg.Duration))
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Replicas*cfg.Workers)
	for i, c := range clients {
		for w := range cfg.Workers {
			wg.Go(func() {
				if err := work(runCtx, c, srv.URL, i*cfg.Workers+w); err != nil {
					errs <- fmt.Errorf("replica %d worker %d: %w", i+1, w+1, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return result{}, err
	}

	res := result{
		Store:    store,
		Elapsed:  cfg.Duration,
		Admitted: api.Admitted.Len(),
		Limited:  api.Limited.Load(),
		Global:   api.LimitedGlobal.Load(),
		MaxIn1s:  api.Admitted.MaxIn(time.Second),
		Rate:     cfg.Rate,
	}
	for _, c := range counters {
		res.Replicas = append(res.Replicas, replicaStats{c.Sent.Load(), c.OK.Load(), c.Limited.Load(), c.Failed.Load()})
	}
	report(out, res)
	return res, nil
}

// work sends requests until ctx ends, each to one of six endpoints picked
// at random, as a worker creating customers and charging them would.
func work(ctx context.Context, c *http.Client, base string, worker int) error {
	rng := rand.New(rand.NewPCG(uint64(worker), 1)) // the same mix every run
	for n := 0; ; n++ {
		id := fmt.Sprintf("%d%05d", worker, n)
		var method, path string
		form := url.Values{}
		switch rng.IntN(6) {
		case 0:
			method, path = http.MethodPost, "/v1/customers"
			form.Set("email", "jenny+"+id+"@example.com")
		case 1:
			method, path = http.MethodGet, "/v1/customers/cus_"+id
		case 2:
			method, path = http.MethodPost, "/v1/customers/cus_"+id
			form.Set("metadata[order]", id)
		case 3:
			method, path = http.MethodPost, "/v1/payment_intents"
			form.Set("amount", "2000")
			form.Set("currency", "usd")
		case 4:
			method, path = http.MethodPost, "/v1/payment_intents/pi_"+id+"/confirm"
		case 5:
			method, path = http.MethodGet, "/v1/charges"
		}
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer sk_test_example")
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			// Stripe's advice for every POST: it makes a retry safe.
			req.Header.Set("Idempotency-Key", fmt.Sprintf("example-%d-%d", worker, n))
		}
		resp, err := c.Do(req)
		if err != nil {
			// The run's deadline: a slot beyond it is refused at once
			// (throttle.ErrBeyondDeadline), or the wait is cut short.
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// redisClients returns a constructor of Redis clients (one per replica, as
// separate processes would have), a description of the store, and a
// function releasing what it started. With no URL it starts an embedded
// miniredis, which runs the Transport's Lua scripts like Redis does.
func redisClients(rawURL string) (func() redis.UniversalClient, string, func(), error) {
	if rawURL != "" {
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, "", nil, fmt.Errorf("-redis %q: %w", redactURL(rawURL), err)
		}
		return func() redis.UniversalClient { return redis.NewClient(opts) }, "Redis at " + redactURL(rawURL), func() {}, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, fmt.Errorf("embedded Redis: %w", err)
	}
	newClient := func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: mr.Addr()}) }
	return newClient, "an embedded Redis (miniredis; pass -redis redis://host:6379 or set REDIS_URL for a real one)", mr.Close, nil
}

// redactURL drops the password of a Redis URL, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func collect(errs <-chan error) []error {
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return all
}

// report prints what the run did.
func report(out io.Writer, r result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replica\tsent\t200s\t429s\terrors\t")
	var sent int64
	for i, s := range r.Replicas {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t\n", i+1, s.Sent, s.OK, s.Limited, s.Failed)
		sent += s.Sent
	}
	_ = tw.Flush()
	rate := float64(r.Admitted) / r.Elapsed.Seconds()
	fmt.Fprintf(out, "\nfleet:  %d requests sent, %d admitted in %v = %.1f requests/s, %.1f %% of the %d/s quota\n",
		sent, r.Admitted, r.Elapsed, rate, 100*r.Utilisation(), r.Rate)
	fmt.Fprintf(out, "server: at most %d requests admitted in any 1 s window (limit %d); %d answered 429 (%d global-rate, %d endpoint-rate)\n", r.MaxIn1s, r.Rate, r.Limited, r.Global, r.Limited-r.Global)
	if r.OK() {
		fmt.Fprintf(out, "verdict: OK: %d replicas shared one quota, used %.1f %% of it and met no 429.\n", len(r.Replicas), 100*r.Utilisation())
	} else {
		fmt.Fprintf(out, "verdict: NOT OK: %d answered 429, %.1f %% of the quota used (want 0 and ≥ 90 %%).\n", r.Limited, 100*r.Utilisation())
	}
}
