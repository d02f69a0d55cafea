package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twilio/twilio-go"
	"github.com/twilio/twilio-go/client"
	api "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exredis"
	"github.com/throttlekit/throttle/examples/internal/exrun"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// run sends messages twice against a fresh local API each time, without
// the throttle and then with it, and prints what it did to cfg.Out.
func run(ctx context.Context, cfg config) (result, error) {
	if cfg.Duration <= 0 || cfg.Concurrency < 1 {
		return result{}, errors.New("duration and concurrency must be positive")
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%d senders send SMS through twilio-go to a local Twilio-like API for %v per phase:\n", len(senders), cfg.Duration)
	fmt.Fprintf(&head, "per sender 1 message/s (3 long codes), 3 (toll-free), 100 (short code); %d requests in progress per account.\n", cfg.Concurrency)
	var res result
	var err error
	res.Without, res.With, err = exrun.RunPhases(ctx, cfg.Out, cfg.RedisURL, head.String(), func(ctx context.Context, store *exredis.Store) (exrun.Summary, error) {
		return phase(ctx, cfg, store)
	})
	return res, err
}

// phase sends messages once against a fresh local API: through a plain
// http.Client when store is nil, else through a throttle.Transport whose
// buckets and leases live in store.
func phase(ctx context.Context, cfg config, store *exredis.Store) (exrun.Summary, error) {
	// The simulated Twilio: -concurrency requests in flight per account,
	// each served in latency, and the documented sender rates, counted as
	// strict sliding logs.
	srv, err := throttletest.NewServer(throttletest.Twilio(throttletest.TwilioConfig{Concurrency: cfg.Concurrency}),
		throttletest.WithServiceTime(latency))
	if err != nil {
		return exrun.Summary{}, err
	}
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	workers := 0
	for _, s := range senders {
		workers += s.Workers
	}
	base := &http.Transport{MaxIdleConnsPerHost: workers}
	defer base.CloseIdleConnections()
	var rt http.RoundTripper = base
	name := "without the throttle"
	meter := &exrun.Meter{}
	if store != nil {
		name = "with the throttle   "
		// The preset, for the local host and the account's concurrency
		// limit, as you would set your account's.
		preset := providers.TwilioPreset(providers.TwilioConfig{Host: host, Concurrency: cfg.Concurrency})
		rdb := store.Client()
		defer func() { _ = rdb.Close() }()
		ns := fmt.Sprintf("example-twilio-%d-%d", os.Getpid(), time.Now().UnixNano())
		t, err := throttle.New(base, slices.Concat(preset.Options(), store.Options(rdb, ns),
			[]throttle.Option{throttle.WithHeadroom(cfg.Headroom), throttle.WithObserver(meter)})...)
		if err != nil {
			return exrun.Summary{}, err
		}
		// Close stops the pause and lease subscriptions and the renewals.
		defer func() { _ = t.Close() }()
		rt = t
	}

	// One RestClient per sender, each on an http.Client that names its
	// sender and gives its requests the phase's deadline; the worker w
	// sends from bySender[w].
	phaseCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	clients := make([]*twilio.RestClient, len(senders))
	var bySender []int
	for i, s := range senders {
		clients[i] = newClient(srv.URL, &http.Client{Transport: &senderTransport{Ctx: phaseCtx, From: s.From, Base: rt}})
		for range s.Workers {
			bySender = append(bySender, i)
		}
	}
	return exrun.Run(phaseCtx, exrun.Phase{
		Name: name, Duration: cfg.Duration, Quota: quota(), Workers: workers,
		Server: exrun.Simulated{S: srv}, Meter: meter, Limited: "over a limit", Out: cfg.Out, TTY: cfg.TTY,
	}, func(_ context.Context, w, n int) error {
		return send(clients[bySender[w]], senders[bySender[w]].From, w, n)
	})
}

// newClient returns a Twilio RestClient for the example's account whose
// requests go to baseURL, through hc.
func newClient(baseURL string, hc *http.Client) *twilio.RestClient {
	c := &client.Client{Credentials: client.NewCredentials(accountSID, authToken), HTTPClient: hc}
	c.SetAccountSid(accountSID)
	return twilio.NewRestClientWithParams(twilio.ClientParams{Client: &localClient{Client: c, BaseURL: baseURL}})
}

// send sends one message from from. A 429 is the server's to count and not
// an error (Twilio's POST carries no idempotency key, so the Transport
// does not retry it); a slot beyond the phase's end stops the worker.
func send(c *twilio.RestClient, from string, worker, n int) error {
	return sendTo(c, from, fmt.Sprintf("+1415555%04d", n%10000), worker, n)
}

// sendTo is send to the number to.
func sendTo(c *twilio.RestClient, from, to string, worker, n int) error {
	p := &api.CreateMessageParams{}
	p.SetFrom(from)
	p.SetTo(to)
	p.SetBody(fmt.Sprintf("Your code is %d-%d", worker, n))
	_, err := c.Api.CreateMessage(p)
	var te *client.TwilioRestError
	switch {
	case errors.As(err, &te) && te.Status == http.StatusTooManyRequests:
		return nil
	case errors.Is(err, throttle.ErrBeyondDeadline):
		return exrun.ErrStop
	}
	return err
}
