package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/throttletest"
)

// maxLimited bounds the 429s the throttled phase of a test run may meet,
// for the reason the Stripe example's test gives: under -race on a loaded
// machine this process can stall longer than the headroom's 53 ms. The
// example's own exit status, which .ci/run checks, does demand zero.
const maxLimited = 5

// TestRun runs both phases for 2 s each against the strict local Twilio
// and checks what must hold however slow the machine is: without the
// throttle the senders overrun their rates and the account's concurrency,
// with it they all but never do; utilisation is only checked loosely.
func TestRun(t *testing.T) {
	var out strings.Builder
	res, err := run(context.Background(), config{Duration: 2 * time.Second, Concurrency: 10, Headroom: defaultHeadroom, Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Without.Limited == 0 {
		t.Errorf("without the throttle the senders met no 429: %v", res.Without)
	}
	if res.With.Limited > maxLimited {
		t.Errorf("with the throttle the server answered %d messages 429, want ≤ %d", res.With.Limited, maxLimited)
	}
	if u := res.With.Utilisation(); u < 0.6 {
		t.Errorf("with the throttle the senders used %.1f %% of the quota, want ≥ 60 %%", 100*u)
	}
	for _, s := range []string{res.Without.String(), res.With.String(), "Store: an embedded miniredis"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the output lacks %q", s)
		}
	}
	if strings.Contains(out.String(), authToken) {
		t.Error("the output holds the auth token")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config
	}{
		{"no duration", config{Duration: 0, Concurrency: 1}},
		{"no concurrency", config{Duration: time.Second, Concurrency: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := run(context.Background(), tc.cfg); err == nil {
				t.Error("run accepted the configuration")
			}
		})
	}
}

// TestRealNeedsCredentials checks that -real sends nothing without test
// credentials.
func TestRealNeedsCredentials(t *testing.T) {
	for _, rc := range []realConfig{{}, {AccountSID: "AC1"}, {AuthToken: authToken}, {AccountSID: "SK1", AuthToken: authToken}} {
		if err := runReal(context.Background(), config{Duration: time.Second, Out: &strings.Builder{}}, rc); err != errNoCredentials {
			t.Errorf("%+v: err %v, want errNoCredentials", rc, err)
		}
	}
}

// TestRealAgainstLocal runs -real's phase against the local Twilio in
// place of api.twilio.com: every message is from the magic sender, at its
// long code's rate, none refused, and the output holds no credential.
func TestRealAgainstLocal(t *testing.T) {
	srv, err := throttletest.NewServer(throttletest.Twilio(throttletest.TwilioConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var out strings.Builder
	rc := realConfig{AccountSID: accountSID, AuthToken: authToken, BaseURL: srv.URL, Workers: 2}
	if err := runReal(context.Background(), config{Duration: 2 * time.Second, Headroom: defaultHeadroom, Out: &out}, rc); err != nil {
		t.Fatalf("runReal: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	rep := srv.Report()
	// 2 s at 1 message/s from a fresh bucket: 2 or 3 (the burst's one).
	if rep.Arrived < 2 || rep.Arrived > 3 || rep.Admitted != rep.Arrived {
		t.Errorf("the server saw %d messages, admitted %d (refused %v), want 2-3, all admitted", rep.Arrived, rep.Admitted, rep.Refused)
	}
	if strings.Contains(out.String(), authToken) || strings.Contains(out.String(), accountSID) {
		t.Error("the output holds a credential")
	}
}
