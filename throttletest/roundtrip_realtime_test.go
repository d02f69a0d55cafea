package throttletest_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// TestRoundTripRealTime runs the fast cells of TestRoundTrip on the system
// clock, as a user's test would: the Transport's timers, the network and
// the scheduler now stand between a slot and its arrival. A request the
// server refuses fails the test whatever the machine's load (a slow client
// is never over its quota); the share of the quota reached is only
// logged, because on a loaded machine it measures the machine (see
// TestRoundTrip for the exact figures).
func TestRoundTripRealTime(t *testing.T) {
	cells := []struct {
		name      string
		profile   throttletest.Profile
		opts      []throttletest.Option
		preset    func(host string) providers.Preset
		workers   int
		perSecond float64
		req       func(base string, worker, i int) *http.Request
	}{
		{
			name: "stripe-live", profile: throttletest.Stripe(throttletest.StripeConfig{}),
			preset: func(h string) providers.Preset {
				return providers.StripePreset(providers.StripeConfig{Hosts: []string{h}})
			},
			// A worker per endpoint, as in TestRoundTrip: workers moving
			// across endpoints are a known failure
			// (TestStripeWorkersAcrossEndpoints).
			workers: 8, perSecond: 100,
			req: func(b string, w, i int) *http.Request { return get(b, stripePaths[w%len(stripePaths)], stripeAuth) },
		},
		{
			name: "twilio-short-code", profile: throttletest.Twilio(throttletest.TwilioConfig{}),
			preset:  func(h string) providers.Preset { return providers.TwilioPreset(providers.TwilioConfig{Host: h}) },
			workers: 32, perSecond: 100,
			req: func(b string, w, i int) *http.Request { return message(b, "12345") },
		},
		{
			name: "twilio-toll-free", profile: throttletest.Twilio(throttletest.TwilioConfig{}),
			preset:  func(h string) providers.Preset { return providers.TwilioPreset(providers.TwilioConfig{Host: h}) },
			workers: 4, perSecond: 3,
			req: func(b string, w, i int) *http.Request { return message(b, "+18005550101") },
		},
		{
			name: "twilio-concurrency", profile: throttletest.Twilio(throttletest.TwilioConfig{}),
			opts:    []throttletest.Option{throttletest.WithServiceTime(20 * time.Millisecond)},
			preset:  func(h string) providers.Preset { return providers.TwilioPreset(providers.TwilioConfig{Host: h}) },
			workers: 150,
			req:     func(b string, w, i int) *http.Request { return get(b, "/2010-04-01/Accounts/AC123/Calls.json", nil) },
		},
		{
			name: "stripe-concurrency", profile: throttletest.Stripe(throttletest.StripeConfig{Concurrency: 10}),
			opts: []throttletest.Option{throttletest.WithServiceTime(200 * time.Millisecond)},
			preset: func(h string) providers.Preset {
				return providers.StripePreset(providers.StripeConfig{Concurrency: 10, Hosts: []string{h}})
			},
			// TestRoundTripStripeConcurrency's pair, with 200 ms of service
			// in place of its second.
			workers: 15,
			req:     func(b string, w, i int) *http.Request { return get(b, stripePaths[w%len(stripePaths)], stripeAuth) },
		},
		{
			name: "shopify-plus", profile: throttletest.Shopify(throttletest.ShopifyConfig{Rate: 20, Bucket: 80}),
			preset: func(h string) providers.Preset {
				return providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyPlus, Host: h})
			},
			workers: 8, perSecond: 20,
			req: func(b string, w, i int) *http.Request { return get(b, "/admin/api/2024-10/orders.json", nil) },
		},
		{
			name: "openai-requests", profile: throttletest.OpenAI(throttletest.OpenAIConfig{RPM: 6000, TPM: 10_000_000}),
			preset: func(h string) providers.Preset {
				return providers.OpenAIPreset(providers.LLMConfig{RPM: 6000, TPM: 10_000_000, Host: h})
			},
			workers: 32, perSecond: 100,
			req: func(b string, w, i int) *http.Request { return chat(b, 400) },
		},
	}
	for _, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			srv, err := throttletest.NewServer(c.profile, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			p := c.preset(hostOf(t, srv.URL))
			tr := throttle.NewTransport(nil, p.Options()...)
			defer func() { _ = tr.Close() }()
			client := &http.Client{Transport: tr}
			errs := drive(client, c.workers, 3500*time.Millisecond, func(w, i int) *http.Request { return c.req(srv.URL, w, i) })
			rep := srv.Report()
			if c.perSecond > 0 {
				n := len(rep.PerSecond) - 1 // the last second is partial
				t.Logf("%s: %d admitted, refused %v, %.3f of %v/s in seconds 1 to %d, transport errors %d, per second %v",
					c.name, rep.Admitted, rep.Refused, float64(rep.AdmittedBetween(1, n))/float64(max(1, n-1))/c.perSecond, c.perSecond, n, errs, rep.PerSecond)
			} else {
				t.Logf("%s: %d admitted, refused %v, most in flight %d, mean in flight %.1f, transport errors %d",
					c.name, rep.Admitted, rep.Refused, rep.MaxInFlight, rep.InService.Seconds()/rep.End.Sub(rep.Start).Seconds(), errs)
			}
			if rep.RefusedTotal() != 0 {
				t.Errorf("refused %v, want none", rep.Refused)
			}
		})
	}
}

// drive runs workers goroutines sending requests made by mk through
// client until run elapses on the wall clock (which bounds the cell; the
// server's report measures it), and returns the transport errors seen.
// Requests carry no deadline, so the Transport waits for their slots.
func drive(client *http.Client, workers int, run time.Duration, mk func(worker, i int) *http.Request) int64 {
	var stop atomic.Bool
	timer := time.AfterFunc(run, func() { stop.Store(true) })
	defer timer.Stop()
	var errs atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				resp, err := client.Do(mk(w, i))
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
	return errs.Load()
}
