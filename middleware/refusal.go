package middleware

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// refusalBody is the JSON body of WriteRefusal.
type refusalBody struct {
	Error refusalError `json:"error"`
}

type refusalError struct {
	Type       string `json:"type"`
	Message    string `json:"message"`
	Rule       string `json:"rule,omitempty"`
	RetryAfter int64  `json:"retry_after"`
}

// WriteRefusal answers a refused request: 503 Service Unavailable for
// ReasonUnavailable, 429 Too Many Requests otherwise, with a JSON body
//
//	{"error":{"type":"rate_limited","message":"rule \"free\" allows 100 requests per 1m0s","rule":"free","retry_after":12}}
//
// whose type is [Reason.String] and retry_after whole seconds (rounded
// up). The rate-limit headers (Retry-After among them) are the caller's
// to set before; the Limiter has. It is what the Limiter does without
// [WithRefusal], and may be called from such a hook.
func WriteRefusal(w http.ResponseWriter, _ *http.Request, d Decision) {
	status := http.StatusTooManyRequests
	var msg string
	switch d.Reason {
	case ReasonUnavailable:
		status = http.StatusServiceUnavailable
		msg = "the rate limiter's store is unavailable"
	case ReasonConcurrency:
		msg = fmt.Sprintf("rule %q allows %d requests at once", d.Rule, concurrencyOf(d))
	case ReasonCanceled:
		msg = "the request ended while it waited for its slot"
	default:
		msg = fmt.Sprintf("rule %q allows %d requests per %v", d.Rule, d.Limit, d.Window)
	}
	body, err := json.Marshal(refusalBody{Error: refusalError{Type: d.Reason.String(), Message: msg, Rule: d.Rule, RetryAfter: ceilSeconds(d.RetryAfter)}})
	if err != nil {
		// Strings and integers always marshal.
		body = []byte(`{"error":{"type":"rate_limited"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func concurrencyOf(d Decision) int {
	for i := range d.Rules {
		if d.Rules[i].Refused {
			return d.Rules[i].Concurrency
		}
	}
	return 0
}
