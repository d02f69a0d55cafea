package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// maxLimited bounds the 429s a sender may meet in a test run. Zero cannot
// be promised on a loaded machine: a long code's messages are 1.05 s apart
// (5 % headroom), and the server's strict window refuses the second of two
// that reach it less than 1 s apart, so a stall of over 50 ms of this
// process (senders, embedded Redis and server alike), under -race with
// other packages' tests on the same two cores, can cost a sender a 429.
// That 429 cuts the sender's rate by 15 % for seconds, which widens its
// margin to about 240 ms, so a second needs a far longer stall. Typical
// runs meet none; runs beside the Stripe test met up to 4 over all senders.
const maxLimited = 2

// TestRun sends messages for 2.5 s with the example's default settings
// against the strict fake Twilio, and checks what must hold however slow
// the machine is; throughput, which depends on speed, is only checked
// loosely.
func TestRun(t *testing.T) {
	var out strings.Builder
	cfg := config{Replicas: 1, Workers: 4, Duration: 2500 * time.Millisecond, Concurrency: 10, Headroom: defaultHeadroom}
	res, err := run(context.Background(), cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err) // a failed request, or a status other than 201 or 429
	}
	if len(res.Senders) != len(senders) {
		t.Fatalf("got %d senders, want %d", len(res.Senders), len(senders))
	}
	for _, s := range res.Senders {
		t.Run(s.From, func(t *testing.T) {
			if s.MaxIn1s > s.MPS {
				t.Errorf("the fake admitted %d messages in 1 s, over its limit of %d", s.MaxIn1s, s.MPS)
			}
			if s.Limited > maxLimited {
				t.Errorf("the server answered %d of its messages 429, want ≤ %d", s.Limited, maxLimited)
			}
			// Every message beyond the limit in a window was answered
			// 429, which maxLimited bounds.
			if limit := s.MPS + maxLimited; s.Busiest > limit {
				t.Errorf("%d messages reached the server in 1 s, want ≤ %d (limit + %d)", s.Busiest, limit, maxLimited)
			}
			if s.Admitted == 0 {
				t.Error("no message accepted")
			}
			t.Logf("%d sent, %d accepted (%.2f/s), %d 429s, busiest 1 s: %d arrived", s.Arrived, s.Admitted, s.Rate(cfg.Duration), s.Limited, s.Busiest)
		})
	}
	// Loosely, as it depends on speed: the senders that their own rate
	// bounds (all but the short code) reach 50 % of it together. Alone
	// they reached 100-107 % in 2.5 s (each sender's first message goes at
	// once), beside the Stripe test 73 %.
	var sent, quota float64
	for _, s := range res.Senders {
		if s.MPS < 100 {
			sent += float64(s.Admitted)
			quota += float64(s.MPS) * cfg.Duration.Seconds()
		}
	}
	if sent < 0.5*quota {
		t.Errorf("the long codes and the toll-free number sent %.0f messages, %.0f %% of their rates, want ≥ 50 %%", sent, 100*sent/quota)
	}
	t.Logf("long codes and toll-free: %.0f %% of their rates", 100*sent/quota)
	if res.LimitedConcurrency > 0 {
		// The account's rule holds ~3 requests in progress; 10 would need
		// every worker in flight at once.
		t.Errorf("the server answered %d requests 429 for the account's concurrency, want 0", res.LimitedConcurrency)
	}
	if res.MaxInFlight > int64(cfg.Concurrency) {
		t.Errorf("the fake had %d requests in progress, over its limit of %d", res.MaxInFlight, cfg.Concurrency)
	}
	t.Logf("account: %d accepted, at most %d in progress; %d 429s (%d concurrency)", res.Admitted(), res.MaxInFlight, res.Limited, res.LimitedConcurrency)
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config
	}{
		{"no replicas", config{Replicas: 0, Workers: 1, Duration: time.Second, Concurrency: 1}},
		{"no workers", config{Replicas: 1, Workers: 0, Duration: time.Second, Concurrency: 1}},
		{"no duration", config{Replicas: 1, Workers: 1, Duration: 0, Concurrency: 1}},
		{"no concurrency", config{Replicas: 1, Workers: 1, Duration: time.Second, Concurrency: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := run(context.Background(), tc.cfg, &strings.Builder{}); err == nil {
				t.Error("run accepted the configuration")
			}
		})
	}
}
