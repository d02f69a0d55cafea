// Command twilio sends text messages from several senders through a local
// Twilio-like API that enforces each sender's rate and the account's
// concurrency strictly, and shows that providers.TwilioPreset keeps every
// sender to its rate and the account under its concurrency limit.
//
//	go run ./examples/twilio                                    # embedded Redis (miniredis)
//	go run ./examples/twilio -redis redis://localhost:6379/0    # a real Redis
//
// The API is an httptest server answering POST
// /2010-04-01/Accounts/{AccountSid}/Messages.json. It admits per sender 1
// message/s from a long code, 3 from a US toll-free number and 100 from a
// short code, each over a strict one-second sliding window, and per account
// a few requests in progress at once (-concurrency), each taking 100 ms.
// Over a limit it answers 429 with Twilio's error 20429 body. Real Twilio
// queues messages over a sender's rate instead of refusing them: the fake
// refuses them so that an overrun shows.
//
// Three long codes, a toll-free number and a short code send, each from
// several workers at once. The buckets and the account's concurrency
// leases live in Redis, as a fleet's would; each request names its sender
// with providers.WithTwilioSender, since the sender is a form field of the
// body, which a rule does not read. The short code could send 100
// messages/s, but the preset's account rule, twilio-concurrency, set to
// the API's limit (TwilioConfig.Concurrency, as you would set your
// account's), keeps the account's requests in progress at that limit.
//
// Flags:
//
//	-replicas n      replicas, each with its own Transport and Redis client (default 1)
//	-workers n       concurrent workers per sender in each replica (default 4)
//	-duration d      how long the senders send (default 5s)
//	-concurrency n   the API's limit of requests in progress per account (default 10)
//	-headroom f      fraction of every rate kept in reserve, throttle.WithHeadroom (default 0.05)
//	-redis url       Redis to share the buckets in (default $REDIS_URL; if empty, an embedded miniredis)
//
// It prints each sender's rate and 429s and what the account saw, and exits
// 1 when a request failed, more than 1 % of the messages met a 429, or a
// sender other than the short code sent under 80 % of its rate.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exredis"
	"github.com/throttlekit/throttle/examples/internal/fakeapi"
	"github.com/throttlekit/throttle/providers"
)

// defaultHeadroom is the example's headroom, above the library's 2 %, for
// the reason the Stripe example gives: a 1 message/s sender's messages are
// 1/(1-h) s apart, so the strict window tolerates h/(1-h) s of jitter
// between slot and server, 20 ms at 2 % and 53 ms at 5 %, and here server,
// Redis and senders share one process on a loaded machine.
const defaultHeadroom = 0.05

// latency is how long the fake API takes to accept a message.
const latency = 100 * time.Millisecond

// Example credentials: the fake checks that the basic-auth user is the
// account of the path; they are never printed.
const (
	accountSID = "AC00000000000000000000000000000001"
	authToken  = "example-auth-token"
)

// senders send the messages: three long codes, a toll-free number and a
// short code.
var senders = []string{"+14155550101", "+14155550102", "+14155550103", "+18445550104", "54321"}

// config is what the flags set.
type config struct {
	Replicas    int           // replicas, each with its own Transport and Redis client
	Workers     int           // concurrent workers per sender in each replica
	Duration    time.Duration // how long the senders send
	Concurrency int           // the API's limit of requests in progress per account
	Headroom    float64       // throttle.WithHeadroom
	RedisURL    string        // a real Redis; empty means an embedded miniredis
}

// senderStats is what the server saw of one sender.
type senderStats struct {
	From     string
	MPS      int // the server's limit, messages/s
	Arrived  int // messages that reached the server
	Admitted int // messages answered 201
	Limited  int64
	MaxIn1s  int // most messages admitted in any 1 s window
	Busiest  int // most messages that arrived in any 1 s window, 429s included
}

// Rate is the sender's admitted messages per second over d.
func (s senderStats) Rate(d time.Duration) float64 { return float64(s.Admitted) / d.Seconds() }

// result is what a run measured.
type result struct {
	Elapsed            time.Duration
	Senders            []senderStats
	Limited            int64 // requests answered 429
	LimitedConcurrency int64 // of which over the account's concurrency
	MaxInFlight        int64 // most requests the account had in progress at once
	Concurrency        int   // the limit of that
}

// Admitted is the number of messages answered 201.
func (r result) Admitted() int {
	n := 0
	for _, s := range r.Senders {
		n += s.Admitted
	}
	return n
}

// maxLimitedShare is the share of messages that may meet a 429 in a run
// that is OK (see defaultHeadroom).
const maxLimitedShare = 0.01

// OK reports whether the run met its promise: 429s for at most 1 % of the
// messages, and every sender but the short code (which the account's rate
// bounds) at 80 % of its rate or more. (A failed request fails the run.)
func (r result) OK() bool {
	if float64(r.Limited) > maxLimitedShare*float64(r.Admitted()) {
		return false
	}
	for _, s := range r.Senders {
		if s.MPS < 100 && s.Rate(r.Elapsed) < 0.8*float64(s.MPS) {
			return false
		}
	}
	return true
}

func main() {
	var cfg config
	flag.IntVar(&cfg.Replicas, "replicas", 1, "replicas, each with its own throttle.Transport and Redis client")
	flag.IntVar(&cfg.Workers, "workers", 4, "concurrent workers per sender in each replica")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long the senders send")
	flag.IntVar(&cfg.Concurrency, "concurrency", 10, "the API's limit of requests in progress per account")
	flag.Float64Var(&cfg.Headroom, "headroom", defaultHeadroom, "fraction of every rate kept in reserve against jitter (library default 0.02)")
	flag.StringVar(&cfg.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL; empty: an embedded miniredis)")
	flag.Parse()

	res, err := run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "twilio example:", err)
		os.Exit(1)
	}
	if !res.OK() {
		os.Exit(1)
	}
}

// run sends messages against a fresh fake API and prints what it did to
// out.
func run(ctx context.Context, cfg config, out io.Writer) (result, error) {
	if cfg.Replicas < 1 || cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Concurrency < 1 {
		return result{}, errors.New("replicas, workers, duration and concurrency must be positive")
	}
	api := fakeapi.NewTwilio(cfg.Concurrency, latency)
	srv := httptest.NewServer(api)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// The preset, for its host and the account's concurrency limit. Its
	// sender comes from each request's context
	// (providers.WithTwilioSender).
	preset := providers.TwilioPreset(providers.TwilioConfig{Host: host, Concurrency: cfg.Concurrency})

	store, err := exredis.Open(cfg.RedisURL)
	if err != nil {
		return result{}, err
	}
	defer store.Close()
	// A namespace of its own, so that runs never share buckets in a real
	// Redis.
	ns := fmt.Sprintf("example-twilio-%d-%d", os.Getpid(), time.Now().UnixNano())

	clients := make([]*http.Client, cfg.Replicas)
	for i := range clients {
		base := &http.Transport{MaxIdleConnsPerHost: cfg.Workers * len(senders)}
		defer base.CloseIdleConnections()
		rdb := store.Client()
		defer func() { _ = rdb.Close() }()
		t, err := throttle.New(base, slices.Concat(preset.Options(), store.Options(rdb, ns),
			[]throttle.Option{throttle.WithHeadroom(cfg.Headroom)})...)
		if err != nil {
			return result{}, fmt.Errorf("replica %d: %w", i+1, err)
		}
		// Close stops the lease store's renewals and pub/sub connection.
		defer func() { _ = t.Close() }()
		clients[i] = &http.Client{Transport: t}
	}

	var head strings.Builder
	fmt.Fprintf(&head, "%d senders × %d replica(s) × %d workers send SMS for %v to a local Twilio-like API:\n", len(senders), cfg.Replicas, cfg.Workers, cfg.Duration)
	fmt.Fprintf(&head, "per sender 1 message/s (long code), 3 (toll-free), 100 (short code); %d requests in progress per account.\n", cfg.Concurrency)
	fmt.Fprintf(&head, "Each replica: its own throttle.Transport with providers.TwilioPreset, headroom %.0f %%; buckets in %s.\n\n", 100*cfg.Headroom, store.Desc)
	if _, err := io.WriteString(out, head.String()); err != nil {
		return result{}, err
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Replicas*len(senders)*cfg.Workers)
	for i, c := range clients {
		for _, from := range senders {
			for w := range cfg.Workers {
				wg.Go(func() {
					if err := send(runCtx, c, srv.URL, from, fmt.Sprintf("r%dw%d", i+1, w+1)); err != nil {
						errs <- fmt.Errorf("replica %d, %s, worker %d: %w", i+1, from, w+1, err)
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		return result{}, err
	}

	res := result{
		Elapsed:            cfg.Duration,
		Limited:            api.Limited.Load(),
		LimitedConcurrency: api.LimitedConcurrency.Load(),
		MaxInFlight:        api.MaxInFlight.Load(),
		Concurrency:        cfg.Concurrency,
	}
	seen := api.Senders()
	for _, from := range senders {
		s, ok := seen[from]
		if !ok {
			res.Senders = append(res.Senders, senderStats{From: from, MPS: fakeapi.TwilioMPS(from)})
			continue
		}
		res.Senders = append(res.Senders, senderStats{
			From: from, MPS: s.MPS,
			Arrived: s.Arrived.Len(), Admitted: s.Admitted.Len(), Limited: s.Limited.Load(),
			MaxIn1s: s.Admitted.MaxIn(time.Second), Busiest: s.Arrived.MaxIn(time.Second),
		})
	}
	_, err = io.WriteString(out, report(res))
	return res, err
}

// send sends messages from one sender until ctx ends. A 429 is the
// server's to count: Twilio's POST carries no idempotency key, so the
// Transport does not retry it, and the worker goes on. Any other failure
// ends the worker with an error.
func send(ctx context.Context, c *http.Client, base, from, worker string) error {
	ctx = providers.WithTwilioSender(ctx, from)
	endpoint := base + "/2010-04-01/Accounts/" + accountSID + "/Messages.json"
	for n := 0; ; n++ {
		form := url.Values{
			"From": {from},
			"To":   {fmt.Sprintf("+1415555%04d", n%10000)},
			"Body": {fmt.Sprintf("Your code is %s-%d", worker, n)},
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
		if err != nil {
			return err
		}
		req.SetBasicAuth(accountSID, authToken)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusTooManyRequests {
			return fmt.Errorf("message %d: status %s", n, resp.Status)
		}
	}
}

// kind names a sender's kind from its limit.
func kind(mps int) string {
	switch mps {
	case 1:
		return "long code"
	case 3:
		return "toll-free"
	default:
		return "short code"
	}
}

// report returns what the run did, for printing.
func report(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-13s %-10s %5s %5s %5s %5s %8s %12s\n", "sender", "kind", "limit", "sent", "201s", "429s", "rate", "busiest 1 s")
	var sent int
	for _, s := range r.Senders {
		fmt.Fprintf(&b, "%-13s %-10s %3d/s %5d %5d %5d %6.2f/s %12d\n",
			s.From, kind(s.MPS), s.MPS, s.Arrived, s.Admitted, s.Limited, s.Rate(r.Elapsed), s.Busiest)
		sent += s.Arrived
	}
	fmt.Fprintf(&b, "\naccount: %d messages sent, %d accepted in %v = %.1f/s; at most %d requests in progress (limit %d)\n",
		sent, r.Admitted(), r.Elapsed, float64(r.Admitted())/r.Elapsed.Seconds(), r.MaxInFlight, r.Concurrency)
	fmt.Fprintf(&b, "server:  429s: %d (%d sender-rate, %d concurrency)\n",
		r.Limited, r.Limited-r.LimitedConcurrency, r.LimitedConcurrency)
	switch {
	case !r.OK():
		fmt.Fprintf(&b, "verdict: NOT OK: %d 429s, or a sender under 80 %% of its rate (want ≤ 1 %% 429s, each sender ≥ 80 %%).\n", r.Limited)
	case r.Limited == 0:
		fmt.Fprintf(&b, "verdict: OK: every sender kept to its rate, the account stayed under its concurrency, no 429.\n")
	default:
		fmt.Fprintf(&b, "verdict: OK: every sender kept to its rate, the account stayed under its concurrency; %d 429s (%.1f %%).\n",
			r.Limited, 100*float64(r.Limited)/float64(r.Admitted()))
	}
	return b.String()
}
