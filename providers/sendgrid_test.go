package providers_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/providers"
)

func TestSendGridPreset(t *testing.T) {
	ctx := context.Background()
	sg := providers.SendGridPreset(providers.SendGridConfig{})
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"sendgrid", sg, map[string]throttle.Limit{
				"sendgrid-endpoint": {Rate: 500, Period: time.Minute}, "sendgrid-mail-send": lim(10000, time.Second, 100),
				"sendgrid-v2": lim(600, time.Minute, 6),
			}},
			{"sendgrid overridden", providers.SendGridPreset(providers.SendGridConfig{PerEndpoint: 600, EndpointPeriod: time.Hour, MailSend: 100, V2PerMinute: 60}), map[string]throttle.Limit{
				"sendgrid-endpoint": {Rate: 600, Period: time.Hour}, "sendgrid-mail-send": lim(100, time.Second, 1),
				"sendgrid-v2": lim(60, time.Minute, 1),
			}},
		})
		if a := sg.Rule("sendgrid-endpoint").Algorithm; a != throttle.FixedWindow {
			t.Errorf("sendgrid-endpoint: Algorithm %v, want FixedWindow (SendGrid's quotas reset at an instant)", a)
		}
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"mail send", sg, newReq(ctx, "POST", "https://api.sendgrid.com/v3/mail/send", "{}"), []string{"sendgrid-mail-send"}},
			{"v3 endpoint", sg, newReq(ctx, "GET", "https://api.sendgrid.com/v3/templates/d-4ab5", ""), []string{"sendgrid-endpoint"}},
			{"v2", sg, newReq(ctx, "GET", "https://api.sendgrid.com/api/bounces.get.json", ""), []string{"sendgrid-v2"}},
			{"v2 mail send", sg, newReq(ctx, "POST", "https://api.sendgrid.com/api/mail.send.json", "x"), nil},
			{"other host", sg, newReq(ctx, "POST", "https://api.example.com/v3/mail/send", "{}"), nil},
		})
	})
	t.Run("keys", func(t *testing.T) {
		get := func(path string) *http.Request { return newReq(ctx, "GET", "https://api.sendgrid.com"+path, "") }
		checkKeys(t, []keyCase{
			{"two templates, one endpoint", sg, "sendgrid-endpoint", get("/v3/templates/d-4ab5"), get("/v3/templates/d-99ff"), true},
			{"two endpoints", sg, "sendgrid-endpoint", get("/v3/templates"), get("/v3/marketing/lists"), false},
			{"two methods", sg, "sendgrid-endpoint", get("/v3/templates"), newReq(ctx, "POST", "https://api.sendgrid.com/v3/templates", "{}"), false},
		})
	})
}

func TestSendGridEndpoint(t *testing.T) {
	for _, tt := range []struct{ method, path, want string }{
		{"", "/v3/templates/d-4ab5/versions/0bc1", "GET /v3/templates/{id}/versions/{id}"},
		{"DELETE", "/v3/marketing/lists/8f9c2e4a-1b2c-4d5e-8f90-123456789abc/", "DELETE /v3/marketing/lists/{id}"},
		{"POST", "/v3/mail/send", "POST /v3/mail/send"},
		{"GET", "/v3/whitelabel/domains", "GET /v3/whitelabel/domains"},
	} {
		if got := providers.SendGridEndpoint(tt.method, tt.path); got != tt.want {
			t.Errorf("SendGridEndpoint(%q, %q) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestSendGridHeaders shows that SendGrid's answers need no dialect: the
// standard X-RateLimit-* fields give the quota and the wait until its
// reset, a Unix time in seconds.
func TestSendGridHeaders(t *testing.T) {
	now := time.Unix(1392815263-10, 0)
	checkDialects(t, []dialectCase{
		{
			name: "sendgrid 200", status: 200, now: now,
			h:    hdr("X-RateLimit-Limit", "500", "X-RateLimit-Remaining", "499", "X-RateLimit-Reset", "1392815263"),
			want: header.Signal{Quotas: []header.Quota{{Name: "requests", Unit: "requests", Limit: 500, HasLimit: true, Remaining: 499, HasRemaining: true, Reset: 10 * time.Second, HasReset: true}}},
		},
	})
	s := header.Parse(429, hdr("X-RateLimit-Limit", "500", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1392815263"), now, time.Hour)
	if w, ok := s.Wait(); !s.Limited || !ok || w != 10*time.Second {
		t.Fatalf("429: Limited %v, wait %v (%v); want limited, 10s until the reset", s.Limited, w, ok)
	}
}

// TestSendGridEndpointLearnsTheReset: SendGrid's endpoint quota resets at
// the instant its X-RateLimit-Reset gives, not on a minute of the Unix
// epoch. The preset's FixedWindow takes that instant from the first
// answer: the request after an endpoint's quota (500 less the 2 %
// headroom) waits for SendGrid's reset, 15 s away, not the 40 s to the
// next minute.
func TestSendGridEndpointLearnsTheReset(t *testing.T) {
	start := time.Unix(1_700_000_000, 0) // 20 s past a minute
	clk := fakeclock.New(start)
	reset := strconv.FormatInt(start.Unix()+15, 10)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"X-Ratelimit-Limit": {"500"}, "X-Ratelimit-Remaining": {"400"}, "X-Ratelimit-Reset": {reset}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	})
	p := providers.SendGridPreset(providers.SendGridConfig{})
	tr, err := throttle.New(base, append(p.Options(), throttle.WithClock(clk), throttle.WithoutWaiting())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	ctx := context.Background()
	sent := 0
	for ; sent < 1000; sent++ {
		resp, err := tr.RoundTrip(newReq(ctx, "GET", "https://api.sendgrid.com/v3/templates/d-4ab5", ""))
		if err != nil {
			var we *throttle.WaitError
			if !errors.As(err, &we) {
				t.Fatalf("request %d: %v, want a *WaitError", sent, err)
			}
			if we.Wait < 15*time.Second || we.Wait > 16*time.Second {
				t.Fatalf("after %d requests the next waits %v, want SendGrid's reset 15 s away (plus at most the 1 s guard)", sent, we.Wait)
			}
			t.Logf("after %d requests the next waits %v", sent, we.Wait)
			break
		}
		_ = resp.Body.Close()
	}
	if sent != 490 {
		t.Fatalf("%d requests went before the first wait, want 490 (500 less the headroom)", sent)
	}
}

// rtFunc is an http.RoundTripper of a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
