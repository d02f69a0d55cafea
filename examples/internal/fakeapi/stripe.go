package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Stripe is a Stripe-like API enforcing a global rate per account and a
// rate per endpoint, each over a strict sliding window of one second. Over
// either limit it answers 429 with Stripe-Rate-Limited-Reason
// (global-rate or endpoint-rate) and a Stripe-style JSON error; otherwise
// 200 with a small JSON object. It knows customers and payment intents:
//
//	POST /v1/customers, GET|POST /v1/customers/{id},
//	POST /v1/payment_intents, POST /v1/payment_intents/{id}/confirm,
//	GET /v1/charges
//
// Its fields must not be changed once it serves. It is safe for concurrent
// use.
type Stripe struct {
	global   *Window
	endpoint *Window

	// Arrived records the arrival of every request to a known endpoint,
	// admitted or not: what the fleet sent, as the server saw it.
	Arrived Log
	// Admitted records the arrival of every request answered 200.
	Admitted Log
	// Limited counts the requests answered 429, LimitedGlobal those over
	// the global rate (the others were over an endpoint's rate).
	Limited, LimitedGlobal atomic.Int64

	ids atomic.Int64
}

// NewStripe returns a Stripe admitting global requests/s in all and
// perEndpoint requests/s per endpoint.
func NewStripe(global, perEndpoint int) *Stripe {
	return &Stripe{global: NewWindow(global, time.Second), endpoint: NewWindow(perEndpoint, time.Second)}
}

// stripeRoutes maps the endpoints the fake knows to the object they return.
var stripeRoutes = map[string]string{
	"POST /v1/customers":                    "customer",
	"GET /v1/customers/{id}":                "customer",
	"POST /v1/customers/{id}":               "customer",
	"POST /v1/payment_intents":              "payment_intent",
	"POST /v1/payment_intents/{id}/confirm": "payment_intent",
	"GET /v1/charges":                       "list",
}

// stripePrefixes are the ID prefixes of the objects the fake returns.
var stripePrefixes = map[string]string{"customer": "cus_", "payment_intent": "pi_", "list": ""}

func (s *Stripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	endpoint := stripeRoute(r.Method, r.URL.Path)
	object, ok := stripeRoutes[endpoint]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "message": "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ").",
		}})
		return
	}
	// Stripe counts the global limit per account: the secret key.
	account := r.Header.Get("Authorization")
	s.Arrived.Add(now)
	reason := ""
	switch {
	case !s.global.Allow(account, now):
		reason = "global-rate"
	case !s.endpoint.Allow(account+" "+endpoint, now):
		reason = "endpoint-rate"
	}
	if reason != "" {
		s.Limited.Add(1)
		if reason == "global-rate" {
			s.LimitedGlobal.Add(1)
		}
		w.Header().Set("Stripe-Rate-Limited-Reason", reason)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"type":    "invalid_request_error",
			"code":    "rate_limit",
			"message": "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
		}})
		return
	}
	s.Admitted.Add(now)
	body := map[string]any{"object": object}
	if object == "list" {
		body["data"] = []any{}
	} else {
		body["id"] = fmt.Sprintf("%s%014d", stripePrefixes[object], s.ids.Add(1))
	}
	writeJSON(w, http.StatusOK, body)
}

// stripeRoute returns the endpoint of a request: its method and its path
// with object IDs (segments with a character that is not a lowercase letter
// or '_') replaced by {id}. It is the server's own routing, written apart
// from providers.StripeEndpoint on purpose.
func stripeRoute(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if i > 0 && strings.ContainsFunc(s, func(c rune) bool { return (c < 'a' || c > 'z') && c != '_' }) {
			segs[i] = "{id}"
		}
	}
	return method + " /" + strings.Join(segs, "/")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The client may be gone; there is no one to tell.
	_ = json.NewEncoder(w).Encode(v)
}
