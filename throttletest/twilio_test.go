package throttletest_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

const messagesPath = "/2010-04-01/Accounts/AC123/Messages.json"

func form(from string) string {
	return url.Values{"From": {from}, "To": {"+14155550100"}, "Body": {"hi"}}.Encode()
}

func TestTwilioConcurrency(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			once.Do(func() { close(held) })
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	})
	h, _ := newHandler(t, throttletest.Twilio(throttletest.TwilioConfig{Concurrency: 2}), throttletest.WithHandler(next))
	hold := http.Header{"X-Hold": {"1"}}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(h, "GET", "/2010-04-01/Accounts/AC123/Calls.json", hold, "")
		}()
	}
	<-held
	// Both held requests are admitted before the third arrives: wait
	// for the report to count them.
	for h.Report().InFlight < 2 {
		time.Sleep(time.Millisecond) // polling, not timing
	}
	resp := serve(h, "GET", "/2010-04-01/Accounts/AC123/Calls.json", nil, "")
	other := serve(h, "GET", "/2010-04-01/Accounts/AC999/Calls.json", nil, "")
	close(release)
	wg.Wait()

	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third in flight: status %d, want 429", resp.StatusCode)
	}
	if got := resp.Header.Get("Twilio-Concurrent-Requests"); got != "2" {
		t.Errorf("Twilio-Concurrent-Requests %q, want 2", got)
	}
	if got := resp.Header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q: Twilio documents none", got)
	}
	body := decode(t, resp)
	if body["code"] != float64(20429) || body["status"] != float64(429) || body["message"] != "Too Many Requests" ||
		body["more_info"] != "https://www.twilio.com/docs/errors/20429" {
		t.Errorf("body %v, want error 20429's", body)
	}
	sig := header.Parse(resp.StatusCode, resp.Header, t0, 0, providers.Twilio)
	if !sig.Limited || !sig.Concurrent || !sig.HasInFlight || sig.InFlight != 2 {
		t.Errorf("the client reads %+v: want Limited, Concurrent, InFlight 2", sig)
	}
	if other.StatusCode != http.StatusCreated || other.Header.Get("Twilio-Concurrent-Requests") != "1" {
		t.Errorf("another account: status %d, in flight %q; want 201 (its own cap), 1", other.StatusCode, other.Header.Get("Twilio-Concurrent-Requests"))
	}
	rep := h.Report()
	if rep.Refused[throttletest.TwilioConcurrency] != 1 || rep.MaxInFlight != 3 || rep.Rules[throttletest.TwilioConcurrency].MaxInFlight != 2 {
		t.Errorf("report: refused %v, most in flight %d, rule %+v", rep.Refused, rep.MaxInFlight, rep.Rules[throttletest.TwilioConcurrency])
	}
}

func TestTwilioSenders(t *testing.T) {
	for _, c := range []struct {
		name, from, rule string
		perSecond        int
	}{
		{"long-code", "+14155550101", throttletest.TwilioLongCode, 1},
		{"toll-free", "+18005550101", throttletest.TwilioTollFree, 3},
		{"short-code", "12345", throttletest.TwilioShortCode, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, fc := newHandler(t, throttletest.Twilio(throttletest.TwilioConfig{}))
			for i := range c.perSecond + 1 {
				resp := serve(h, "POST", messagesPath, nil, form(c.from))
				// Over the sender's rate Twilio queues: 201 all the same.
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("message %d: status %d, want 201", i+1, resp.StatusCode)
				}
				if i == 0 {
					m := decode(t, resp)
					if m["status"] != "queued" || m["from"] != c.from || m["sid"] == "" {
						t.Errorf("message resource %v", m)
					}
				}
			}
			if rep := h.Report(); rep.Refused[c.rule] != 1 || rep.RefusedTotal() != 1 {
				t.Errorf("refused %v, want one over %s", rep.Refused, c.rule)
			}
			fc.Advance(time.Second)
			serve(h, "POST", messagesPath, nil, form(c.from))
			if rep := h.Report(); rep.RefusedTotal() != 1 {
				t.Errorf("a second later: refused %v, want still one", rep.Refused)
			}
		})
	}
	t.Run("other-sender", func(t *testing.T) {
		h, _ := newHandler(t, throttletest.Twilio(throttletest.TwilioConfig{}))
		for range 5 {
			serve(h, "POST", messagesPath, nil, form("MyCompany"))
		}
		if rep := h.Report(); rep.RefusedTotal() != 0 {
			t.Errorf("an alphanumeric sender meets no sender rule: refused %v", rep.Refused)
		}
	})
}
