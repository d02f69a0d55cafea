package fakeapi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Twilio is a Twilio-like Messaging API. It knows one endpoint,
//
//	POST /2010-04-01/Accounts/{AccountSid}/Messages.json
//
// with the form fields From, To and Body, authenticated by HTTP basic auth
// whose user is the AccountSid of the path. It answers 201 with a message
// resource in the state "queued" after Latency, and enforces two limits:
//
//   - per sender, at most the sender's messages per second (MPS) over a
//     strict sliding window of one second: 1 for a long code, 3 for a US
//     toll-free number (+1800, +1833, …), 100 for a short code (3 to 8
//     digits). Twilio itself queues a message over its sender's rate
//     rather than refusing it; the fake refuses it so that the overrun
//     shows.
//   - per account, at most Concurrency requests in progress at once
//     (Twilio publishes no number; 100 is the figure third parties cite).
//
// Over either limit it answers at once with 429 and Twilio's error 20429
// body, and no Retry-After, like Twilio.
//
// Its exported fields must not be changed once it serves. It is safe for
// concurrent use.
type Twilio struct {
	// Concurrency is the account's limit of requests in progress; it must
	// be positive.
	Concurrency int
	// Latency is how long an admitted request takes.
	Latency time.Duration

	// Limited counts the requests answered 429, LimitedConcurrency those
	// over the account's concurrency (the others were over a sender's
	// rate).
	Limited, LimitedConcurrency atomic.Int64

	// MaxInFlight is the most requests the server had in progress at once
	// for one account.
	MaxInFlight atomic.Int64

	ids atomic.Int64

	mu       sync.Mutex
	inFlight map[string]int     // per account
	senders  map[string]*Sender // per From
	windows  map[int]*Window    // per MPS
}

// Sender is what the Twilio fake saw of one sender. Its logs are safe for
// concurrent use.
type Sender struct {
	// MPS is the sender's limit in messages per second.
	MPS int
	// Arrived records every message from the sender, admitted or not;
	// Admitted those answered 201.
	Arrived, Admitted Log
	// Limited counts its messages refused for its rate.
	Limited atomic.Int64
}

// NewTwilio returns a Twilio allowing concurrency requests in progress per
// account, each taking latency.
func NewTwilio(concurrency int, latency time.Duration) *Twilio {
	return &Twilio{
		Concurrency: concurrency,
		Latency:     latency,
		inFlight:    make(map[string]int),
		senders:     make(map[string]*Sender),
		windows:     make(map[int]*Window),
	}
}

// Senders returns what the fake saw of each sender that sent a message,
// by sender.
func (t *Twilio) Senders() map[string]*Sender {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]*Sender, len(t.senders))
	for k, v := range t.senders {
		out[k] = v
	}
	return out
}

// TwilioMPS returns the messages per second Twilio allows a sender (see
// [Twilio]), or 0 for a sender that is not a phone number or short code.
// It is written apart from the providers package's classification on
// purpose: the fake is the server's side.
func TwilioMPS(from string) int {
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	if n, ok := strings.CutPrefix(from, "+"); ok && digits(n) && len(n) >= 8 {
		if len(n) == 11 && n[0] == '1' {
			switch n[1:4] {
			case "800", "833", "844", "855", "866", "877", "888":
				return 3
			}
		}
		return 1
	}
	if digits(from) && len(from) >= 3 && len(from) <= 8 {
		return 100
	}
	return 0
}

func (t *Twilio) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2010-04-01/Accounts/")
	account, tail, _ := strings.Cut(rest, "/")
	if !ok || tail != "Messages.json" || r.Method != http.MethodPost {
		twilioError(w, http.StatusNotFound, 20404, "The requested resource "+r.URL.Path+" was not found")
		return
	}
	if user, _, ok := r.BasicAuth(); !ok || user != account {
		twilioError(w, http.StatusUnauthorized, 20003, "Authenticate")
		return
	}
	from, to := r.PostFormValue("From"), r.PostFormValue("To")
	mps := TwilioMPS(from)
	if mps == 0 || to == "" {
		twilioError(w, http.StatusBadRequest, 21212, "The 'From' number "+from+" is not a valid phone number or shortcode.")
		return
	}

	now := time.Now()
	t.mu.Lock()
	s := t.senders[from]
	if s == nil {
		s = &Sender{MPS: mps}
		t.senders[from] = s
	}
	win := t.windows[mps]
	if win == nil {
		win = NewWindow(mps, time.Second)
		t.windows[mps] = win
	}
	s.Arrived.Add(now)
	busy := t.inFlight[account] >= t.Concurrency
	overRate := !busy && !win.Allow(from, now)
	if !busy && !overRate {
		t.inFlight[account]++
		if n := int64(t.inFlight[account]); n > t.MaxInFlight.Load() {
			t.MaxInFlight.Store(n) // under t.mu: no lost update
		}
	}
	t.mu.Unlock()
	if busy || overRate {
		t.Limited.Add(1)
		if busy {
			t.LimitedConcurrency.Add(1)
		} else {
			s.Limited.Add(1)
		}
		twilioError(w, http.StatusTooManyRequests, 20429, "Too Many Requests")
		return
	}
	s.Admitted.Add(now)
	defer func() {
		t.mu.Lock()
		t.inFlight[account]--
		t.mu.Unlock()
	}()

	select {
	case <-time.After(t.Latency):
	case <-r.Context().Done():
		return // the client is gone
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"sid":          fmt.Sprintf("SM%032d", t.ids.Add(1)),
		"account_sid":  account,
		"from":         from,
		"to":           to,
		"body":         r.PostFormValue("Body"),
		"status":       "queued",
		"num_segments": "1",
	})
}

// twilioError answers with Twilio's error body, as in
//
//	{"code":20429,"message":"Too Many Requests","more_info":"https://www.twilio.com/docs/errors/20429","status":429}
func twilioError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, map[string]any{
		"code":      code,
		"message":   message,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code),
		"status":    status,
	})
}
