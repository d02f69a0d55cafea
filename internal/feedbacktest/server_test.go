package feedbacktest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
)

// dialect is the rate-limit header style of the shared-quota server.
type dialect int

const (
	// ietfHeaders: RateLimit-Policy and RateLimit (draft -10) on every
	// response, Retry-After on 429.
	ietfHeaders dialect = iota
	// xRateLimitHeaders: X-RateLimit-Limit/-Remaining/-Reset (delta
	// seconds) on every response, Retry-After on 429.
	xRateLimitHeaders
	// retryAfterOnly: nothing but Retry-After, on 429 only.
	retryAfterOnly
)

func (d dialect) String() string {
	switch d {
	case ietfHeaders:
		return "IETF"
	case xRateLimitHeaders:
		return "X-RateLimit"
	default:
		return "Retry-After only"
	}
}

// quota is the strict sliding-window quota of the shared-quota tests,
// limit requests per window, with the headers of dialect d: what such a
// server can honestly say (fleettest.Quota): remaining is the limit minus the
// requests accepted in the window, this one included; reset (IETF t,
// X-RateLimit-Reset, Retry-After) the whole seconds, rounded up, until the
// oldest accepted request leaves the window, when the next slot frees.
// Every 429 carries Retry-After.
func (d dialect) quota(limit int, window time.Duration) fleettest.Quota {
	return fleettest.Quota{
		Limit:            limit,
		Window:           window,
		RetryAfter:       true,
		IETFHeaders:      d == ietfHeaders,
		RateLimitHeaders: d == xRateLimitHeaders,
	}
}

// exhausted returns the headers of a 429 of the quota of dialect d, limit
// requests per window, when it is spent and its next slot frees within the
// second: what quota answers such a request with.
func (d dialect) exhausted(limit int, window time.Duration) http.Header {
	h := http.Header{"Retry-After": {"1"}}
	switch d {
	case ietfHeaders:
		h.Set("RateLimit-Policy", `"default";q=`+strconv.Itoa(limit)+`;w=`+strconv.Itoa(int((window+time.Second-1)/time.Second)))
		h.Set("RateLimit", `"default";r=0;t=1`)
	case xRateLimitHeaders:
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", "1")
	}
	return h
}
