// Command twilio sends text messages through github.com/twilio/twilio-go
// from several senders against a local Twilio-like API that enforces each
// sender's rate and the account's concurrency strictly: first without the
// throttle, then with the SDK's HTTP client on a throttle.Transport with
// providers.TwilioPreset, its buckets and leases shared through Redis.
//
//	go -C examples run ./twilio                                   # embedded Redis (miniredis)
//	REDIS_URL=redis://localhost:6379/0 go -C examples run ./twilio # a real Redis
//
// The local API is throttletest's Twilio profile: per sender 1 message/s
// from a long code, 3 from a US toll-free number and 100 from a short code,
// each counted strictly (at most that many in any second), and per account
// -concurrency requests in progress at once, each taking 20 ms. Over the
// account's concurrency it answers 429 with Twilio's error 20429 body; a
// message over its sender's rate it queues, as Twilio does (201), and
// counts as over its limit. The quota is the senders' rates together, 106
// messages/s; the summary's "over a limit" counts both kinds.
//
// twilio-go has no setting for its base URL: the example gives
// twilio.NewRestClientWithParams a client.BaseClient that sends the SDK's
// requests to the local server (localClient), and the SDK's
// client.Client an http.Client whose Transport names each request's
// sender for the preset's per-sender rules (providers.WithTwilioSender:
// the sender is a form field of the body, which a rule does not read).
//
// With -real it sends through api.twilio.com instead, with the test
// credentials in TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, throttled only:
// messages from Twilio's magic number +15005550006, which test credentials
// "send" without sending or charging anything, and which live credentials
// cannot send from (it is no live number), so no real message ever leaves.
// The credentials go to Twilio and nowhere else: never printed, and the
// preset keys its buckets by a hash.
//
//	TWILIO_ACCOUNT_SID=AC... TWILIO_AUTH_TOKEN=... go -C examples run ./twilio -real
//
// Each phase prints its progress every second (one line rewritten in place
// on a terminal) and ends with one line: the messages and 429s the server
// saw, the rate it accepted against the quota, and the p50 and p99 of the
// waits for a slot or a lease. The exit status is 1 when the throttled
// phase went over a limit, used less than 90 % of the quota, or a call
// failed.
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

// defaultHeadroom is the example's headroom, above the library's 2 %, for
// the reason the Stripe example gives: a 1 message/s sender's messages are
// 1/(1-h) s apart, so the strict window tolerates h/(1-h) s of jitter
// between slot and server, 20 ms at 2 % and 53 ms at 5 %, and here server,
// Redis and senders share one process on a loaded machine.
const defaultHeadroom = 0.05

// minUtilisation is the share of the quota the throttled phase must use.
const minUtilisation = 0.9

// latency is how long the local API takes to accept a message.
const latency = 20 * time.Millisecond

// Example credentials: the local API checks that the basic-auth user is
// the account of the path; they are never printed. twilio-go accepts only
// letters and digits in both.
const (
	accountSID = "AC00000000000000000000000000000001"
	authToken  = "exampleauthtoken0000000000000000"
)

// sender is one sender of the run and how many workers send from it.
type sender struct {
	From    string
	MPS     int // the local API's limit, messages/s
	Workers int
}

// senders send the messages: three long codes, a toll-free number and a
// short code, the short code from enough workers that, without the
// throttle, they run into the account's concurrency limit too.
var senders = []sender{
	{"+14155550101", 1, 2}, {"+14155550102", 1, 2}, {"+14155550103", 1, 2},
	{"+18445550104", 3, 2},
	{"54321", 100, 16},
}

// quota is the senders' rates together, in messages/s.
func quota() float64 {
	q := 0
	for _, s := range senders {
		q += s.MPS
	}
	return float64(q)
}

// config is what the flags set.
type config struct {
	Duration    time.Duration // how long each phase runs
	Concurrency int           // the API's limit of requests in progress per account
	Headroom    float64       // throttle.WithHeadroom
	RedisURL    string        // a real Redis; empty means an embedded miniredis
	Out         io.Writer     // where the lines go
	TTY         bool          // Out is a terminal
}

// result is what a run measured.
type result struct {
	Without, With exrun.Summary
}

// OK reports whether the throttled phase kept its promise: nothing over a
// limit (no 429, no message queued over its sender's rate) and at least
// minUtilisation of the quota.
func (r result) OK() bool {
	return r.With.Limited == 0 && r.With.Utilisation() >= minUtilisation
}

func main() {
	cfg := config{Out: os.Stdout, TTY: exrun.IsTerminal(os.Stdout)}
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long each phase runs")
	flag.IntVar(&cfg.Concurrency, "concurrency", 10, "the local API's limit of requests in progress per account")
	flag.Float64Var(&cfg.Headroom, "headroom", defaultHeadroom, "fraction of every rate kept in reserve against jitter (library default 0.02)")
	flag.StringVar(&cfg.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL; empty: an embedded miniredis)")
	useReal := flag.Bool("real", false, "send test messages through api.twilio.com with the test credentials in $TWILIO_ACCOUNT_SID and $TWILIO_AUTH_TOKEN (from Twilio's magic number: nothing is sent or charged; throttled only)")
	flag.Parse()

	if *useReal {
		rc := realConfig{AccountSID: os.Getenv("TWILIO_ACCOUNT_SID"), AuthToken: os.Getenv("TWILIO_AUTH_TOKEN"), Workers: 2}
		if err := runReal(context.Background(), cfg, rc); err != nil {
			fmt.Fprintln(os.Stderr, "twilio example:", err)
			os.Exit(1)
		}
		return
	}

	res, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "twilio example:", err)
		os.Exit(1)
	}
	if !res.OK() {
		fmt.Fprintf(os.Stderr, "twilio example: the throttled phase went over a limit %d times and used %.1f %% of the quota (want none, and ≥ %.0f %%)\n",
			res.With.Limited, 100*res.With.Utilisation(), 100*minUtilisation)
		os.Exit(1)
	}
}
