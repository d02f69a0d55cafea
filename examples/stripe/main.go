// Command stripe runs a fleet of workers calling Stripe through
// github.com/stripe/stripe-go/v82 against a local Stripe-like API that
// enforces its quota strictly: first without the throttle, then with each
// replica's stripe.Client on an http.Client whose Transport is a
// throttle.Transport with providers.StripePreset, its buckets shared
// through Redis.
//
//	go -C examples run ./stripe                                   # embedded Redis (miniredis)
//	REDIS_URL=redis://localhost:6379/0 go -C examples run ./stripe # a real Redis
//	STRIPE_KEY=sk_test_... go -C examples run ./stripe -real       # Stripe's test mode, read-only calls
//
// The local API is throttletest's Stripe profile: 100 requests/s per
// account (-rate) and 25 requests/s per endpoint, each counted strictly (at
// most that many in any second), answering 429 with
// Stripe-Rate-Limited-Reason like Stripe. The replicas use
// providers.StripePreset as it is but for its hosts (the local server's)
// and its global rate (-rate).
//
// Each phase prints its progress every second (one line rewritten in place
// on a terminal) and ends with one line: the requests and 429s the server
// saw, the rate it admitted against the quota, and the p50 and p99 of the
// waits for a slot. The exit status is 1 when the throttled phase met a
// 429, used less than 90 % of the quota, or a call failed.
//
// With -real it calls api.stripe.com instead, with the key in STRIPE_KEY
// (a test-mode key, sk_test_ or rk_test_, and only that: the example
// refuses a live key) and the preset's test-mode limits (25 requests/s),
// throttled only, with read-only calls (balance, one page of customers).
// The key is sent to Stripe and nowhere else: it is never printed, and the
// Transport keys its buckets by a hash.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/throttlekit/throttle/examples/internal/exrun"
)

// defaultHeadroom is the example's headroom, above the library's 2 %. At
// headroom h a bucket's requests are spaced 1/((1-h)·rate) apart, and a
// strict 1 s window sees one request too many only when the way from slot
// to server squeezes them by h/(1-h) s: 20 ms at 2 %, 53 ms at 5 %. Here
// the server shares one process with the workers and an embedded Redis on
// a loaded machine.
const defaultHeadroom = 0.05

// defaultWorkers is the workers per replica: 12 in all, which without the
// throttle send thousands of requests a second. More only lengthen the
// queues, and on a loaded machine deep queues meet 429s: many waiters'
// timers fire together, and one that runs late reaches the server squeezed
// against the next (8 per replica met 1 to 3 429s in every 3 s run here, 3
// met 0 in 5 runs of 6).
const defaultWorkers = 3

// minUtilisation is the share of the quota the throttled phase must use.
const minUtilisation = 0.9

// config is what the flags set.
type config struct {
	Replicas int           // worker replicas, each with its own stripe.Client, Transport and Redis client
	Workers  int           // concurrent workers per replica
	Duration time.Duration // how long each phase runs
	Rate     int           // the API's global quota in requests/s, and the preset's
	Headroom float64       // throttle.WithHeadroom
	RedisURL string        // a real Redis; empty means an embedded miniredis
	Out      io.Writer     // where the lines go
	TTY      bool          // Out is a terminal
}

// result is what a run measured.
type result struct {
	Without, With exrun.Summary
}

// OK reports whether the throttled phase kept its promise: no 429 and at
// least minUtilisation of the quota.
func (r result) OK() bool {
	return r.With.Limited == 0 && r.With.Utilisation() >= minUtilisation
}

func main() {
	cfg := config{Out: os.Stdout, TTY: exrun.IsTerminal(os.Stdout)}
	useReal := flag.Bool("real", false, "call api.stripe.com with the test-mode key in $STRIPE_KEY (read-only calls, throttled only)")
	flag.IntVar(&cfg.Replicas, "replicas", 4, "worker replicas, each with its own stripe.Client, throttle.Transport and Redis client")
	flag.IntVar(&cfg.Workers, "workers", defaultWorkers, "concurrent workers per replica")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long each phase runs")
	flag.IntVar(&cfg.Rate, "rate", 100, "the local API's global quota in requests/s (Stripe live mode: 100)")
	flag.Float64Var(&cfg.Headroom, "headroom", defaultHeadroom, "fraction of every rate kept in reserve against jitter (library default 0.02)")
	flag.StringVar(&cfg.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL; empty: an embedded miniredis)")
	flag.Parse()

	if *useReal {
		if err := runReal(context.Background(), cfg, os.Getenv("STRIPE_KEY")); err != nil {
			fmt.Fprintln(os.Stderr, "stripe example:", err)
			os.Exit(1)
		}
		return
	}
	res, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stripe example:", err)
		os.Exit(1)
	}
	if !res.OK() {
		fmt.Fprintf(os.Stderr, "stripe example: the throttled phase met %d 429s and used %.1f %% of the quota (want none, and ≥ %.0f %%)\n",
			res.With.Limited, 100*res.With.Utilisation(), 100*minUtilisation)
		os.Exit(1)
	}
}
