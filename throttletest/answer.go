package throttletest

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// This file holds what the profiles' answers share.

// jsonAnswer returns an answer of status with v as its JSON body.
func jsonAnswer(status int, v any) Answer {
	body, err := json.Marshal(v)
	if err != nil { // not reached: the profiles marshal maps and structs of strings and numbers
		body = nil
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return Answer{Status: status, Header: h, Body: body}
}

// retryAfterSeconds formats a wait as Retry-After's delay-seconds (RFC 9110
// §10.2.3), rounded up so that a client waiting it finds room: at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}

// merge adds src's fields to a's header.
func (a Answer) merge(src http.Header) Answer {
	if len(src) == 0 {
		return a
	}
	if a.Header == nil {
		a.Header = http.Header{}
	}
	for k, vs := range src {
		a.Header[k] = append(a.Header[k], vs...)
	}
	return a
}
