package fleettest

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Answer is what a strict server knows when it answers one request: the
// input of a [Shape]'s wording. [Server] builds one per request under a
// [Quota], or under a refusal ([Server.Refuse]).
type Answer struct {
	// Now is the request's arrival, on the wall clock (Unix resets are
	// reckoned from it).
	Now time.Time
	// Limit and Window are the quota's.
	Limit  int
	Window time.Duration
	// Remaining is what the window has left after this request: the limit
	// less the requests it counts, this one included when accepted.
	Remaining int
	// Reset is when the window resets, as X-RateLimit-Reset, IETF t and
	// GitHub mean it: for a sliding log, the instant its oldest counted
	// request leaves it (now + Window when it counts none); for a fixed
	// window, its end; during a refusal, the refusal's end.
	Reset time.Time
	// Replenished is when the window counts nothing any more, as OpenAI's
	// x-ratelimit-reset-requests means it ("resets to its initial
	// state"): for a sliding log, the instant its newest counted request
	// leaves it (now when it counts none); for a fixed window, its end;
	// during a refusal, the refusal's end.
	Replenished time.Time
	// Rejected reports a rejection: the window is full, or the server
	// refuses everything for now.
	Rejected bool
	// RetryAfter is, for a rejection, the time until the request would be
	// accepted: until a slot frees, or until the refusal ends.
	RetryAfter time.Duration
}

// Shape is how a strict server words its answers: the rate-limit fields it
// puts on every answer, and what a rejection looks like (its status and
// the fields only a rejection carries), each after one real provider. The
// named shapes are listed by [Shapes]; the zero Shape says nothing (no
// field, a bare 429), as [ShapeNone] does.
//
// A Shape is a plain value, safe for concurrent use.
type Shape struct {
	// Name identifies the shape in test and table names.
	Name string
	// Dialects are the provider dialects a client needs to read the shape
	// (see [WorkerConfig.Dialects]); empty when the standard parsers do.
	Dialects []string

	fields func(a Answer, h http.Header)     // on every answer; nil: none
	reject func(a Answer, h http.Header) int // a rejection's status and extra fields; nil: bare 429
	timed  bool                              // a rejection names when to come back
}

// Timed reports whether the shape's rejections name when to come back (a
// Retry-After, or a reset with nothing remaining). Stripe's and the bare
// 429 do not: a client can only probe.
func (s Shape) Timed() bool { return s.timed }

// ReportsQuota reports whether the shape's answers carry what remains of
// the quota: its successes say something, not only its rejections.
func (s Shape) ReportsQuota() bool { return s.fields != nil }

// Encode returns the answer a server of shape s gives: 200, or the
// shape's rejection, with the shape's fields.
func (s Shape) Encode(a Answer) Response {
	r := Response{Status: http.StatusOK, Header: http.Header{}}
	if s.fields != nil {
		s.fields(a, r.Header)
	}
	if a.Rejected {
		r.Status = http.StatusTooManyRequests
		if s.reject != nil {
			r.Status = s.reject(a, r.Header)
		}
	}
	return r
}

// The named shapes. Each success and rejection follows the real provider
// (docs/FEEDBACK.md's matrix section lists the sources); where a provider
// rounds, the shape's name says how.
var (
	// ShapeNone: no rate-limit field at all; a rejection is a bare 429.
	ShapeNone = Shape{Name: "none"}
	// ShapeRetryAfter: successes carry nothing; a rejection is a 429 with
	// Retry-After in whole seconds (rounded up, at least 1).
	ShapeRetryAfter = Shape{Name: "retry-after", reject: retryAfterSeconds, timed: true}
	// ShapeXRLUnixCeil: X-RateLimit-Limit, -Remaining and -Reset on every
	// answer, the reset as Unix seconds rounded up; a rejection is a 429
	// with Retry-After in whole seconds.
	ShapeXRLUnixCeil = xrlShape("xrl-unix-ceil", func(a Answer) string { return strconv.FormatInt(unixCeil(a.Reset), 10) })
	// ShapeXRLUnixFloor: as ShapeXRLUnixCeil, Unix seconds rounded down.
	ShapeXRLUnixFloor = xrlShape("xrl-unix-floor", func(a Answer) string { return strconv.FormatInt(a.Reset.Unix(), 10) })
	// ShapeXRLUnixMillis: as ShapeXRLUnixCeil, Unix milliseconds rounded
	// up.
	ShapeXRLUnixMillis = xrlShape("xrl-unix-ms", func(a Answer) string { return strconv.FormatInt(unixMilliCeil(a.Reset), 10) })
	// ShapeXRLDelta: as ShapeXRLUnixCeil, the reset as whole seconds from
	// now, rounded up.
	ShapeXRLDelta = xrlShape("xrl-delta", func(a Answer) string { return strconv.Itoa(ceilSeconds(a.Reset.Sub(a.Now))) })
	// ShapeXRLDeltaFrac: as ShapeXRLUnixCeil, the reset as fractional
	// seconds from now, rounded up to the millisecond ("0.347").
	ShapeXRLDeltaFrac = xrlShape("xrl-delta-frac", func(a Answer) string { return millisSeconds(a.Reset.Sub(a.Now)) })
	// ShapeIETF: the IETF draft's (-10) RateLimit-Policy
	// ("default";q=Limit;w=Window) and RateLimit ("default";r=Remaining;
	// t=reset) on every answer, w and t in whole seconds rounded up; a
	// rejection is a 429 with Retry-After in whole seconds.
	ShapeIETF = Shape{Name: "ietf", fields: ietfFields, reject: retryAfterSeconds, timed: true}
	// ShapeGitHub: x-ratelimit-limit, -remaining, -used, -reset (Unix
	// seconds, rounded up) and x-ratelimit-resource: core on every
	// answer; over the limit, a 403 with x-ratelimit-remaining: 0 and no
	// retry-after. Read with the "github" dialect.
	ShapeGitHub = Shape{Name: "github", Dialects: []string{"github"}, fields: githubFields, reject: forbidden, timed: true}
	// ShapeOpenAI: x-ratelimit-limit-requests, -remaining-requests and
	// -reset-requests, the time until the window is replenished as a Go
	// duration ("1s", "347ms", "6m0s"), rounded up to the millisecond;
	// a rejection is a 429 with retry-after in whole seconds. Read with
	// the "openai" dialect.
	ShapeOpenAI = Shape{Name: "openai", Dialects: []string{"openai"}, fields: openAIFields, reject: retryAfterSeconds, timed: true}
	// ShapeShopify: X-Shopify-Shop-Api-Call-Limit: used/limit on every
	// answer; a rejection is a 429 with Retry-After in fractional seconds
	// ("2.0", "0.347"), the real time until a slot frees rounded up to the
	// millisecond. Read with the "shopify" dialect.
	ShapeShopify = Shape{Name: "shopify", Dialects: []string{"shopify"}, fields: shopifyFields, reject: retryAfterFloat, timed: true}
	// ShapeStripe: successes carry nothing; a rejection is a 429 with
	// Stripe-Rate-Limited-Reason: global-rate and no timing field. Read
	// with the "stripe" dialect.
	ShapeStripe = Shape{Name: "stripe", Dialects: []string{"stripe"}, reject: stripeReason}
)

// Shapes returns every named shape, in a fixed order.
func Shapes() []Shape {
	return []Shape{
		ShapeNone, ShapeRetryAfter,
		ShapeXRLUnixCeil, ShapeXRLUnixFloor, ShapeXRLUnixMillis, ShapeXRLDelta, ShapeXRLDeltaFrac,
		ShapeIETF, ShapeGitHub, ShapeOpenAI, ShapeShopify, ShapeStripe,
	}
}

// ShapeNamed returns the named shape, or false.
func ShapeNamed(name string) (Shape, bool) {
	i := slices.IndexFunc(Shapes(), func(s Shape) bool { return s.Name == name })
	if i < 0 {
		return Shape{}, false
	}
	return Shapes()[i], true
}

func xrlShape(name string, reset func(Answer) string) Shape {
	return Shape{
		Name: name,
		fields: func(a Answer, h http.Header) {
			h.Set("X-RateLimit-Limit", strconv.Itoa(a.Limit))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(a.Remaining))
			h.Set("X-RateLimit-Reset", reset(a))
		},
		reject: retryAfterSeconds,
		timed:  true,
	}
}

func ietfFields(a Answer, h http.Header) {
	h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, a.Limit, ceilSeconds(a.Window)))
	h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, a.Remaining, ceilSeconds(a.Reset.Sub(a.Now))))
}

func githubFields(a Answer, h http.Header) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(a.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(a.Remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(a.Limit-a.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(unixCeil(a.Reset), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func openAIFields(a Answer, h http.Header) {
	h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(a.Limit))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(a.Remaining))
	h.Set("X-Ratelimit-Reset-Requests", goDuration(a.Replenished.Sub(a.Now)))
}

func shopifyFields(a Answer, h http.Header) {
	h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", a.Limit-a.Remaining, a.Limit))
}

func retryAfterSeconds(a Answer, h http.Header) int {
	h.Set("Retry-After", strconv.Itoa(max(ceilSeconds(a.RetryAfter), 1)))
	return http.StatusTooManyRequests
}

func retryAfterFloat(a Answer, h http.Header) int {
	h.Set("Retry-After", floatSeconds(a.RetryAfter))
	return http.StatusTooManyRequests
}

// forbidden is GitHub's primary rate limit: 403, remaining 0 (the fields
// already say so), no retry-after.
func forbidden(Answer, http.Header) int { return http.StatusForbidden }

func stripeReason(_ Answer, h http.Header) int {
	h.Set("Stripe-Rate-Limited-Reason", "global-rate")
	return http.StatusTooManyRequests
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}

// ceilMillis returns d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// unixCeil returns t as Unix seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// unixMilliCeil returns t as Unix milliseconds, rounded up.
func unixMilliCeil(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) > 0 {
		ms++
	}
	return ms
}

// millisSeconds formats d as seconds with three decimals, rounded up to
// the millisecond: "0.347", "2.000".
func millisSeconds(d time.Duration) string {
	ms := ceilMillis(d)
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}

// floatSeconds formats d as Shopify does, seconds with at least one
// decimal, rounded up to the millisecond: "2.0", "0.347", "0.35".
func floatSeconds(d time.Duration) string {
	s := strings.TrimRight(millisSeconds(d), "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	return s
}

// goDuration formats d as OpenAI does, a Go duration rounded up to the
// millisecond: "1s", "347ms", "6m0s"; "0s" for d ≤ 0.
func goDuration(d time.Duration) string {
	return (time.Duration(ceilMillis(d)) * time.Millisecond).String()
}
