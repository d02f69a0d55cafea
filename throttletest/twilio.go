package throttletest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// TwilioConfig tunes [Twilio]. The zero value is Twilio's REST API with a
// cap of 100 requests in flight per account and the documented sender
// rates.
type TwilioConfig struct {
	// Concurrency is the most requests per account in flight at once. If
	// ≤ 0, 100: Twilio publishes no number; third parties say 100
	// (unconfirmed), which is also providers.DefaultTwilioConcurrency.
	Concurrency int

	// LongCode, TollFree and ShortCode are the messages per second of one
	// sender of each kind. If ≤ 0: 1 for a US long code (errors/21611), 3
	// for a toll-free number (support 4411046744987), 100 for a short code.
	LongCode, TollFree, ShortCode int
}

// Twilio rule names, in the order they are checked.
const (
	TwilioConcurrency = "twilio-concurrency"
	TwilioLongCode    = "twilio-long-code"
	TwilioTollFree    = "twilio-toll-free"
	TwilioShortCode   = "twilio-short-code"
)

// Twilio returns a simulated Twilio REST API
// (twilio.com/docs/api/errors/20429, read 2026-11):
//
//   - twilio-concurrency: at most Concurrency requests in flight per
//     account (the AccountSid in /2010-04-01/Accounts/{sid}/...). Over it,
//     status 429 with error 20429's body,
//     {"code":20429,"message":"Too Many Requests","more_info":
//     "https://www.twilio.com/docs/errors/20429","status":429}, and no
//     Retry-After (Twilio documents none).
//   - twilio-long-code, twilio-toll-free, twilio-short-code: messages per
//     second per sender, the "From" form field of POST .../Messages.json,
//     counted as a sliding log. A sender of 3 to 8 digits is a short code;
//     +1 800, 833, 844, 855, 866, 877 or 888 is toll-free; any other
//     number with '+' a long code; other senders meet no sender rule.
//     Twilio does not refuse a message over its sender's rate, it queues
//     it: so does the profile, answering 201 "queued" as for any message,
//     while [Report.Refused] counts it under the sender's rule (a client
//     that paces its senders sees none there).
//
// Every answer carries Twilio-Concurrent-Requests: the account's requests
// in flight when it was decided, the request's own included. A message is
// answered 201 with a JSON message resource (sid, status "queued", from,
// to); other requests 200 with "{}". During a [Handler.Pause] the answer
// is the 20429 one with a Retry-After.
func Twilio(c TwilioConfig) Profile {
	concurrency := c.Concurrency
	if concurrency <= 0 {
		concurrency = 100
	}
	rate := func(n, def int) int {
		if n <= 0 {
			return def
		}
		return n
	}
	sender := func(name string, kind senderKind, perSecond int) throttle.Rule {
		return throttle.Rule{
			Name:      name,
			Limit:     throttle.Limit{Rate: perSecond, Period: time.Second},
			Algorithm: throttle.SlidingLog,
			Match: throttle.Match{
				Methods: []string{http.MethodPost},
				Path:    "/2010-04-01/Accounts/*/Messages.json",
				Func:    func(r *http.Request) bool { return classifySender(r.PostFormValue("From")) == kind },
			},
			Key: func(r *http.Request) string { return twilioAccountSid(r.URL.Path) + "\x00" + r.PostFormValue("From") },
		}
	}
	return Profile{
		Name: "twilio",
		Rules: []throttle.Rule{
			{Name: TwilioConcurrency, Concurrency: concurrency, Key: func(r *http.Request) string { return twilioAccountSid(r.URL.Path) }},
			sender(TwilioLongCode, longCode, rate(c.LongCode, 1)),
			sender(TwilioTollFree, tollFree, rate(c.TollFree, 3)),
			sender(TwilioShortCode, shortCode, rate(c.ShortCode, 100)),
		},
		Answer: twilioAnswer(),
	}
}

func twilioAnswer() func(*http.Request, Decision) Answer {
	var ids idSource
	return func(r *http.Request, d Decision) Answer {
		var a Answer
		switch {
		case d.Admitted || (d.Rule != "" && d.Rule != TwilioConcurrency):
			// Admitted, or over a sender's rate: Twilio queues it.
			if isTwilioMessage(r) {
				a = jsonAnswer(http.StatusCreated, map[string]string{
					"sid": ids.next("SM"), "status": "queued",
					"from": r.PostFormValue("From"), "to": r.PostFormValue("To"),
				})
			} else {
				a = jsonAnswer(http.StatusOK, struct{}{})
			}
		default:
			a = jsonAnswer(http.StatusTooManyRequests, map[string]any{
				"code": 20429, "message": "Too Many Requests",
				"more_info": "https://www.twilio.com/docs/errors/20429", "status": 429,
			})
			if d.Paused {
				a.Header.Set("Retry-After", retryAfterSeconds(d.Wait))
			}
		}
		if q, ok := d.Quota(TwilioConcurrency); ok {
			a.Header.Set("Twilio-Concurrent-Requests", strconv.Itoa(q.InFlight))
		}
		return a
	}
}

func isTwilioMessage(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Messages.json")
}

// twilioAccountSid returns the AccountSid of a Twilio REST path, or "".
func twilioAccountSid(p string) string {
	_, rest, ok := strings.Cut(p, "/Accounts/")
	if !ok {
		return ""
	}
	sid, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(sid, ".json")
}

type senderKind uint8

const (
	otherSender senderKind = iota
	longCode
	tollFree
	shortCode
)

// classifySender tells a Twilio sender's kind from its form.
func classifySender(from string) senderKind {
	if n, ok := strings.CutPrefix(from, "+"); ok {
		if !allDigits(n) || len(n) < 4 {
			return otherSender
		}
		if len(n) == 11 && n[0] == '1' {
			switch n[1:4] {
			case "800", "833", "844", "855", "866", "877", "888":
				return tollFree
			}
		}
		return longCode
	}
	if allDigits(from) && len(from) >= 3 && len(from) <= 8 {
		return shortCode
	}
	return otherSender
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
