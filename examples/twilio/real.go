package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/twilio/twilio-go"
	"github.com/twilio/twilio-go/client"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exrun"
	"github.com/throttlekit/throttle/providers"
)

// magicFrom is Twilio's magic sender for test credentials: a message from
// it "succeeds" without being sent or charged
// (twilio.com/docs/messaging/tutorials/automate-testing, read 2026-12-02).
// Test credentials cannot send from a live number, and live credentials
// cannot send from it (it is no number of a live account), so -real never
// sends a real message, whichever credentials it is given.
const magicFrom = "+15005550006"

// magicTo is the recipient of -real's messages: any valid number; with
// test credentials Twilio connects to none.
const magicTo = "+14108675310"

// errNoCredentials is returned when -real lacks its credentials.
var errNoCredentials = errors.New("-real needs TWILIO_ACCOUNT_SID (AC…) and TWILIO_AUTH_TOKEN: your account's test credentials (Console, Account management, API keys & tokens, Test credentials)")

// realConfig is what -real needs beyond config.
type realConfig struct {
	AccountSID, AuthToken string
	// BaseURL is where the SDK's requests go: api.twilio.com, or a local
	// server in the example's test.
	BaseURL string
	Workers int
}

// runReal runs the throttled phase against Twilio's API with rc's test
// credentials: messages from the magic sender (a long code, 1 message/s by
// the preset), through twilio-go on the preset's Transport.
func runReal(ctx context.Context, cfg config, rc realConfig) error {
	if !strings.HasPrefix(rc.AccountSID, "AC") || rc.AuthToken == "" {
		return errNoCredentials
	}
	if rc.BaseURL == "" {
		rc.BaseURL = twilioAPI
	}
	rc.Workers = max(rc.Workers, 1)
	host := strings.TrimPrefix(strings.TrimPrefix(rc.BaseURL, "https://"), "http://")
	preset := providers.TwilioPreset(providers.TwilioConfig{Host: host})
	// The example's headroom, for the reason defaultHeadroom gives: a
	// long code's messages are 1/(1-h) s apart, and Twilio counts 1 in
	// any second.
	throttled, err := exrun.OpenReal(cfg.RedisURL, "example-twilio-real", append(preset.Options(), throttle.WithHeadroom(cfg.Headroom))...)
	if err != nil {
		return err
	}
	defer throttled.Close()
	phaseCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	hc := &http.Client{Transport: &senderTransport{Ctx: phaseCtx, From: magicFrom, Base: throttled.Transport}}
	c := &client.Client{Credentials: client.NewCredentials(rc.AccountSID, rc.AuthToken), HTTPClient: hc}
	c.SetAccountSid(rc.AccountSID)
	var base client.BaseClient = c
	if rc.BaseURL != twilioAPI {
		base = &localClient{Client: c, BaseURL: rc.BaseURL}
	}
	rest := twilio.NewRestClientWithParams(twilio.ClientParams{Client: base})
	if _, err := fmt.Fprintf(cfg.Out, "%d workers send test messages from Twilio's magic number through %s for %v (1 message/s, a long code's rate); store: %s.\n",
		rc.Workers, host, cfg.Duration, throttled.StoreDesc); err != nil {
		return err
	}
	s, err := exrun.Run(phaseCtx, exrun.Phase{
		Name: host + ", throttled", Duration: cfg.Duration, Quota: 1, Workers: rc.Workers,
		Server: throttled.Counted, Meter: throttled.Meter, Out: cfg.Out, TTY: cfg.TTY,
	}, func(_ context.Context, w, n int) error {
		return sendTo(rest, magicFrom, magicTo, w, n)
	})
	if err != nil {
		return err
	}
	if s.Limited > 0 {
		return fmt.Errorf("%s answered %d requests 429", host, s.Limited)
	}
	return nil
}
