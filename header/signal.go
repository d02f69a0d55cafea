package header

import (
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// DefaultMaxRetryAfter caps every duration read from a response when the
// caller passes maxWait <= 0 to [Parse] or [Signal.Normalize].
//
// Two minutes is long enough to honour every documented server wait in the
// common case (Discord's 64 s, GitHub's 60 s secondary-limit pause, Shopify's
// 2 s, OpenAI's SDK ceiling of 60 s) while short enough that one hostile,
// buggy or misconfigured server (Retry-After: 99999999, a date in year 9999)
// cannot stall a whole fleet of workers for hours. A caller that must honour
// longer waits (an hourly quota) passes a larger maxWait explicitly; a capped
// value is flagged with [Signal.Capped], and a request that hits the limit
// again simply yields another signal.
const DefaultMaxRetryAfter = 2 * time.Minute

// Bounds applied to untrusted header values before any parsing: a value
// longer than this is ignored, so a huge header can never cost more than a
// length check.
const (
	// maxNumericHeaderLen bounds numeric, date and short text fields.
	maxNumericHeaderLen = 256
	// maxStructuredHeaderLen bounds structured fields (IETF RateLimit,
	// RateLimit-Policy, Sforce-Limit-Info) after multiple lines are joined.
	maxStructuredHeaderLen = 4096
	// maxSignalQuotas bounds Signal.Quotas so a list with hundreds of
	// members cannot make matching or storage expensive.
	maxSignalQuotas = 64
	// maxDialectNameLen bounds Signal.Dialect, a name chosen in code
	// that exporters use as an attribute value.
	maxDialectNameLen = 64
	// maxQuotaWindow bounds Quota.Window. A window is a description of a
	// policy, not a wait, so it is not capped at maxWait (a "daily" policy
	// must keep its 24 h window); one leap year is the longest period any
	// known provider uses.
	maxQuotaWindow = 366 * 24 * time.Hour
)

// RetryHint is a server's explicit opinion on whether a request may be
// retried, read from headers such as x-should-retry (OpenAI, Anthropic) or
// Stripe-Should-Retry. The zero value, [RetryHintNone], means the server did
// not say. It is a plain value, safe for concurrent use.
type RetryHint int8

const (
	// RetryHintNone means no retry hint was received (the zero value).
	RetryHintNone RetryHint = iota
	// RetryHintRetry means the server said the request may be retried.
	RetryHintRetry
	// RetryHintDoNotRetry means the server said the request must not be
	// retried, whatever its status.
	RetryHintDoNotRetry
)

// String returns "none", "retry" or "do-not-retry".
func (r RetryHint) String() string {
	switch r {
	case RetryHintRetry:
		return "retry"
	case RetryHintDoNotRetry:
		return "do-not-retry"
	default:
		return "none"
	}
}

// Signal is what one response says about the server's rate limits,
// normalised across header dialects by [Parse].
//
// The zero value means "the response said nothing about rate limits". A
// Signal is a plain value: copy it freely; it is not safe to mutate one
// from several goroutines at once.
type Signal struct {
	// Limited reports that the server rejected the request for rate or
	// quota reasons: any 429; a 503 carrying Retry-After (or retry-after-ms);
	// or a dialect's equivalent, such as GitHub's 403 with
	// x-ratelimit-remaining: 0.
	Limited bool

	// RetryAfter is the wait the server named before the next request
	// (Retry-After, retry-after-ms, or a dialect's documented rule), never
	// negative and capped at maxWait. HasRetryAfter distinguishes an
	// explicit "Retry-After: 0" from no header at all. Quota resets (IETF
	// t, X-RateLimit-Reset) are not copied here: see [Signal.Wait].
	RetryAfter    time.Duration
	HasRetryAfter bool

	// Quotas is what the server reported about each quota or policy, in
	// the order the parsers met them, at most 64 entries. Use
	// [Signal.Quota] to look one up by name.
	Quotas []Quota

	// Scope is the server's name for the limit that applies: Discord's
	// X-RateLimit-Scope ("user", "global", "shared"), GitHub's
	// x-ratelimit-resource ("core", "search"), etc. Empty when unknown.
	Scope string

	// Bucket is the server's opaque rate-limit bucket identifier (Discord
	// X-RateLimit-Bucket). Requests sharing a bucket share a limit.
	Bucket string

	// ShouldRetry is the server's explicit retry hint (x-should-retry,
	// Stripe-Should-Retry); RetryHintNone when absent.
	ShouldRetry RetryHint

	// Reason is the server's machine-readable reason for the limit, e.g.
	// Stripe-Rate-Limited-Reason "global-rate" or "endpoint-concurrency".
	Reason string

	// Capped reports that at least one duration (RetryAfter or a Quota
	// Reset) was longer than maxWait and was cut down to it.
	Capped bool

	// Concurrent reports that the server limits the requests in flight,
	// not their rate, and that this answer is about that limit: a
	// rejection for too many concurrent requests (Stripe's
	// global-concurrency and endpoint-concurrency, Twilio's 20429) when
	// Limited is set. Only dialects set it.
	Concurrent bool

	// InFlight is the server's count of the caller's requests in flight
	// when it answered (Twilio-Concurrent-Requests), never negative;
	// HasInFlight tells a count of 0 from none. Only dialects set it.
	InFlight    int64
	HasInFlight bool

	// Dialect names the [Dialect] that recognised the response as its
	// provider's: a provider's dialect sets its short name ("stripe",
	// "github", ...; package providers lists them) when the response holds
	// one of that provider's own fields, and leaves it alone when it finds
	// none. The standard parsers leave it empty, so "" means that no
	// dialect recognised the response. When several dialects recognise
	// one, the last to run names it.
	//
	// It must be a constant chosen in code, never text read from the
	// response (a header value may be a key, an ID or a URL): exporters
	// make it a metric attribute, whose values must be few. [Signal.Normalize]
	// clears a name longer than 64 bytes or holding a byte other than an
	// ASCII letter, a digit, '-', '_' or '.'.
	Dialect string
}

// Quota is what a server reported about one quota or policy. The zero
// value is an empty report; the Has* flags say which numbers were present.
// Like [Signal], a Quota is a plain value: copy it freely; its methods only
// read it and are safe for concurrent use.
type Quota struct {
	// Name is the policy name: an IETF policy name ("burst", "daily"),
	// "default" for older IETF forms, "requests" for X-RateLimit-*, or a
	// dialect's name ("tokens", "input-tokens", "api-usage", "daily"...).
	Name string
	// Unit is what the quota counts: "requests" (the default),
	// "tokens", "content-bytes" or "concurrent-requests".
	Unit string

	// Limit is the quota size and Remaining what is left of it in the
	// current window; both are never negative.
	Limit, Remaining       int64
	HasLimit, HasRemaining bool

	// Reset is the time until the quota resets, relative to the response:
	// never negative, capped at maxWait (see [Signal.Capped]). What "reset"
	// means depends on the server: OpenAI means fully replenished, GitHub
	// and Discord mean the start of the next window.
	Reset    time.Duration
	HasReset bool

	// Window is the policy's window (IETF w, HubSpot interval); 0 when
	// unknown. It is a description, not a wait, so it is bounded at one
	// year rather than at maxWait.
	Window time.Duration

	// PartitionKey is the IETF pk parameter as standard padded base64:
	// the received text whenever the server encoded it canonically (a
	// value with non-zero padding bits, which RFC 9651 parsers accept, is
	// re-encoded: "sdfjLJUOUH==" becomes "sdfjLJUOUA=="). It may identify
	// a customer or a key: [Quota.String] redacts it; never log it raw.
	PartitionKey string
}

// String formats q for logs with PartitionKey redacted. fmt also uses it
// when a whole Signal is printed with %v.
func (q Quota) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%s unit=%s", q.Name, q.Unit)
	if q.HasLimit {
		fmt.Fprintf(&b, " limit=%d", q.Limit)
	}
	if q.HasRemaining {
		fmt.Fprintf(&b, " remaining=%d", q.Remaining)
	}
	if q.HasReset {
		fmt.Fprintf(&b, " reset=%s", q.Reset)
	}
	if q.Window > 0 {
		fmt.Fprintf(&b, " window=%s", q.Window)
	}
	if q.PartitionKey != "" {
		b.WriteString(" pk=[redacted]")
	}
	b.WriteString("}")
	return b.String()
}

// Exhausted reports whether the server said nothing is left of q.
func (q Quota) Exhausted() bool { return q.HasRemaining && q.Remaining == 0 }

// Quota returns the first quota named name.
func (s Signal) Quota(name string) (Quota, bool) {
	for _, q := range s.Quotas {
		if q.Name == name {
			return q, true
		}
	}
	return Quota{}, false
}

// SetQuota replaces the quota with the same Name, or appends q if there is
// none (and fewer than 64 quotas are held). Dialects use it so that running
// a dialect twice, or after a standard parser that produced the same quota,
// does not duplicate entries.
func (s *Signal) SetQuota(q Quota) {
	if q.Unit == "" {
		q.Unit = "requests"
	}
	for i := range s.Quotas {
		if s.Quotas[i].Name == q.Name {
			s.Quotas[i] = q
			return
		}
	}
	if len(s.Quotas) < maxSignalQuotas {
		s.Quotas = append(s.Quotas, q)
	}
}

// Wait is the best wait the signal names before the next request: the
// server's RetryAfter when one was named (Retry-After takes precedence over
// every reset, as the IETF draft requires), otherwise the longest Reset
// among exhausted quotas (Remaining 0 with a Reset, e.g. IETF
// `r=0;t=5`), otherwise 0 and false.
func (s Signal) Wait() (time.Duration, bool) {
	if s.HasRetryAfter {
		return s.RetryAfter, true
	}
	var w time.Duration
	found := false
	for _, q := range s.Quotas {
		if q.Exhausted() && q.HasReset {
			found = true
			w = max(w, q.Reset)
		}
	}
	return w, found
}

// Normalize enforces the invariants Parse guarantees, and is run by
// Parse after every dialect: every duration is clamped to
// [0, maxWait] (maxWait <= 0 means [DefaultMaxRetryAfter]) and flags
// Capped when it was cut; Window is clamped to [0, 1 year]; negative
// counts are dropped; Quotas is truncated to 64 entries; short text fields
// longer than 256 bytes are cleared, and so is a Dialect name that is not
// a short name (see [Signal.Dialect]). Call it yourself only when you run
// a [Dialect] directly instead of through Parse.
func (s *Signal) Normalize(maxWait time.Duration) {
	if maxWait <= 0 {
		maxWait = DefaultMaxRetryAfter
	}
	var capped bool
	s.RetryAfter, capped = clampSignalWait(s.RetryAfter, maxWait)
	s.Capped = s.Capped || capped
	if len(s.Quotas) > maxSignalQuotas {
		s.Quotas = s.Quotas[:maxSignalQuotas]
	}
	for i := range s.Quotas {
		q := &s.Quotas[i]
		q.Reset, capped = clampSignalWait(q.Reset, maxWait)
		s.Capped = s.Capped || capped
		q.Window, _ = clampSignalWait(q.Window, maxQuotaWindow)
		if q.Limit < 0 || !q.HasLimit {
			q.Limit, q.HasLimit = 0, false
		}
		if q.Remaining < 0 || !q.HasRemaining {
			q.Remaining, q.HasRemaining = 0, false
		}
		if !q.HasReset {
			q.Reset = 0
		}
		if q.Unit == "" {
			q.Unit = "requests"
		}
	}
	s.Scope = boundSignalText(s.Scope)
	s.Bucket = boundSignalText(s.Bucket)
	s.Reason = boundSignalText(s.Reason)
	if !isDialectName(s.Dialect) {
		s.Dialect = ""
	}
}

// Dialect reads one provider's headers into s, after the standard parsers
// have run. It may add or replace quotas (use [Signal.SetQuota]), set
// Limited, RetryAfter, Scope and the other fields, and names itself in
// [Signal.Dialect] (a constant) when the response holds one of its
// provider's own fields. Parse calls
// [Signal.Normalize] after the last dialect, so a dialect need not cap
// durations itself, but it must never produce a negative count on purpose.
//
// Implementations must be safe for concurrent use and must never panic on
// any input: headers come from an untrusted server.
type Dialect interface {
	Parse(status int, h http.Header, now time.Time, s *Signal)
}

// DialectFunc adapts a function to [Dialect]. A nil DialectFunc is not a
// valid Dialect; the function must be safe for concurrent use and never
// panic, as every Dialect.
type DialectFunc func(status int, h http.Header, now time.Time, s *Signal)

// Parse calls f(status, h, now, s).
func (f DialectFunc) Parse(status int, h http.Header, now time.Time, s *Signal) {
	f(status, h, now, s)
}

// Parse reads what one response says about rate limits. now is the
// time the response was received; it is the base for every relative
// duration.
//
// It runs the standard parsers in this order:
//   - retry-after-ms (OpenAI, Azure: milliseconds, possibly with a
//     fraction), else Retry-After (see [ParseRetryAfter]), into RetryAfter;
//   - X-RateLimit-Limit, -Remaining, -Used, -Reset and -Reset-After, else
//     X/Twitter's x-rate-limit-*, into the quota "requests" (Remaining is
//     Limit-Used when only -Used is sent; -Reset-After, in delta-seconds,
//     is preferred to -Reset, read by [ParseReset]), and Scope from
//     x-ratelimit-resource;
//   - IETF RateLimit/RateLimit-Policy in the -10 List form (one quota per
//     policy name), else the -07 Dictionary form, else the -06
//     RateLimit-Limit/-Remaining/-Reset fields (one quota, "default"); the
//     package documentation lists what each form gives;
//   - x-should-retry (OpenAI, Anthropic) into ShouldRetry, see
//     [ParseShouldRetry].
//
// Then it sets Limited for 429, and for 503 carrying a retry-after header,
// runs each dialect in order (later dialects see and may override earlier
// results; nil dialects are skipped), and finally calls
// [Signal.Normalize](maxWait): every duration in the result is in
// [0, maxWait], and maxWait <= 0 means [DefaultMaxRetryAfter].
//
// Only the first line of a repeated numeric or text header field is used,
// as http.Header.Get does; the structured IETF fields join their lines as
// RFC 9651 requires. Values longer than 256 bytes (numeric and text fields)
// or 4 KiB (structured fields) are ignored before parsing. Malformed values
// are ignored, never an error: a signal is advice, and a bad header must
// not fail a response that the server otherwise delivered. Fields are
// found as http.Header.Get finds them, by their canonical keys.
//
// A response without rate-limit fields costs one pass over h's keys, and
// without dialects allocates nothing.
//
// Parse is safe for concurrent use if the dialects are, and does not
// modify h.
func Parse(status int, h http.Header, now time.Time, maxWait time.Duration, dialects ...Dialect) Signal {
	if len(dialects) > 0 {
		return parseDialects(status, h, now, maxWait, dialects)
	}
	var s Signal
	parseStandard(status, h, now, &s)
	s.Normalize(maxWait)
	return s
}

// parseDialects is [Parse] with dialects. Its Signal is on
// the heap, since the dialects (interfaces) receive its address; without
// dialects, Parse keeps its Signal on the stack.
func parseDialects(status int, h http.Header, now time.Time, maxWait time.Duration, dialects []Dialect) Signal {
	s := new(Signal)
	parseStandard(status, h, now, s)
	for _, d := range dialects {
		if d != nil {
			d.Parse(status, h, now, s)
		}
	}
	s.Normalize(maxWait)
	return *s
}

// parseStandard runs the standard parsers of [Parse] on the fields
// h holds, then sets Limited from the status. One pass over h's keys says
// which families of fields are present, so a response without rate-limit
// fields costs that pass and no lookup.
func parseStandard(status int, h http.Header, now time.Time, s *Signal) {
	if len(h) > 0 {
		readStandardFields(h, now, s)
	}
	switch status {
	case http.StatusTooManyRequests:
		s.Limited = true
	case http.StatusServiceUnavailable:
		s.Limited = s.HasRetryAfter
	}
}

func readStandardFields(h http.Header, now time.Time, s *Signal) {
	f := presentFields(h)
	if f == 0 {
		return
	}
	if f&fieldsRetryAfter != 0 {
		if d, ok := parseRetryAfterMillis(headerFirst(h, keyRetryAfterMs, maxNumericHeaderLen)); ok {
			s.RetryAfter, s.HasRetryAfter = d, true
		} else if d, ok := ParseRetryAfter(headerFirst(h, keyRetryAfter, maxNumericHeaderLen), now); ok {
			s.RetryAfter, s.HasRetryAfter = d, true
		}
	}
	if f&(fieldsXRateLimit|fieldsXRateLimitX) != 0 {
		if q, ok := parseXRateLimit(h, now, f); ok {
			s.SetQuota(q)
		}
	}
	if f&fieldsXRateLimit != 0 {
		if r := headerFirst(h, keyXRateLimitResource, maxNumericHeaderLen); r != "" {
			s.Scope = r
		}
	}
	if f&fieldsIETF != 0 {
		for _, q := range parseIETF(h, now) {
			s.SetQuota(q)
		}
	}
	if f&fieldsShouldRetry != 0 {
		s.ShouldRetry = ParseShouldRetry(headerFirst(h, keyShouldRetry, maxNumericHeaderLen))
	}
}

// Canonical keys (textproto.CanonicalMIMEHeaderKey) of the fields that
// Parse reads itself. With a canonical key, h[key] finds exactly
// what h.Get(key) finds, without canonicalising the name on every
// response: http.Header's Set and Add, and the server side of net/http,
// store canonical keys, and a key stored in another form is found by
// neither.
const (
	keyRetryAfterMs       = "Retry-After-Ms"
	keyRetryAfter         = "Retry-After"
	keyXRateLimitResource = "X-Ratelimit-Resource"
	keyShouldRetry        = "X-Should-Retry"
	keyRateLimit          = "Ratelimit"
	keyRateLimitPolicy    = "Ratelimit-Policy"
	keyRateLimitLimit     = "Ratelimit-Limit"
	keyRateLimitRemaining = "Ratelimit-Remaining"
	keyRateLimitReset     = "Ratelimit-Reset"

	// prefixXRateLimit and prefixXRateLimitX begin every X-RateLimit-*
	// and X/Twitter x-rate-limit-* key.
	prefixXRateLimit  = "X-Ratelimit-"
	prefixXRateLimitX = "X-Rate-Limit-"
)

// fieldSet says which families of standard rate-limit fields a header
// holds.
type fieldSet uint8

const (
	fieldsRetryAfter  fieldSet = 1 << iota // Retry-After, Retry-After-Ms
	fieldsXRateLimit                       // X-Ratelimit-*
	fieldsXRateLimitX                      // X-Rate-Limit-* (X/Twitter)
	fieldsIETF                             // Ratelimit, Ratelimit-*
	fieldsShouldRetry                      // X-Should-Retry
)

// presentFields returns the families of standard fields whose canonical
// keys h holds, in one pass over its keys. Every key Parse looks up
// starts with its family's prefix, so a family left out here has nothing
// a lookup would find.
func presentFields(h http.Header) fieldSet {
	var f fieldSet
	for k := range h {
		if len(k) < len(keyRateLimit) { // the shortest key read
			continue
		}
		switch k[0] {
		case 'R':
			if strings.HasPrefix(k, keyRetryAfter) {
				f |= fieldsRetryAfter
			} else if strings.HasPrefix(k, keyRateLimit) {
				f |= fieldsIETF
			}
		case 'X':
			switch {
			case strings.HasPrefix(k, prefixXRateLimit):
				f |= fieldsXRateLimit
			case strings.HasPrefix(k, prefixXRateLimitX):
				f |= fieldsXRateLimitX
			case k == keyShouldRetry:
				f |= fieldsShouldRetry
			}
		}
	}
	return f
}

// Value returns the first value of header field name in h, with
// surrounding whitespace removed, or "" when it is absent or longer than
// maxLen bytes. Dialects use it to read untrusted values with a bound.
// name is found as h.Get finds it, in any case; Value does not modify h.
func Value(h http.Header, name string, maxLen int) string {
	return headerFirst(h, textproto.CanonicalMIMEHeaderKey(name), maxLen)
}

// headerFirst is [Value] for a canonical key: the first line of the
// field, trimmed, or "" when absent or longer than maxLen.
func headerFirst(h http.Header, key string, maxLen int) string {
	v := h[key]
	if len(v) == 0 || len(v[0]) > maxLen {
		return ""
	}
	return strings.TrimSpace(v[0])
}

// headerJoined joins every line of the structured field with canonical
// key key with ", " as RFC 9651 §4.2 requires, or returns false when the
// field is absent or the result would exceed maxLen (the whole field is
// then ignored, never truncated: a truncated list could change meaning).
func headerJoined(h http.Header, key string, maxLen int) (string, bool) {
	lines := h[key]
	if len(lines) == 0 {
		return "", false
	}
	n := 0
	for i, l := range lines {
		n += len(l)
		if i > 0 {
			n += 2
		}
		if n > maxLen {
			return "", false
		}
	}
	return strings.Join(lines, ", "), true
}

// clampSignalWait clamps d to [0, limit] and reports whether it was above.
func clampSignalWait(d, limit time.Duration) (time.Duration, bool) {
	switch {
	case d < 0:
		return 0, false
	case d > limit:
		return limit, true
	}
	return d, false
}

func boundSignalText(s string) string {
	if len(s) > maxNumericHeaderLen {
		return ""
	}
	return s
}

// isDialectName reports whether name is a valid [Signal.Dialect]: at most
// 64 bytes of ASCII letters, digits, '-', '_' and '.'. The empty name is
// valid: no dialect recognised the response.
func isDialectName(name string) bool {
	if len(name) > maxDialectNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// SecondsToDuration converts a number of seconds to a Duration, saturating:
// NaN, zero and negative values give 0, values beyond the range of
// time.Duration give the largest Duration. Never panics.
func SecondsToDuration(sec float64) time.Duration {
	if !(sec > 0) { // also catches NaN
		return 0
	}
	// Round, not truncate: 0.012 s must be 12ms, not 11.999999ms.
	ns := math.Round(sec * float64(time.Second))
	// float64(math.MaxInt64) is 2^63, one past the range: converting it
	// (or more) to int64 is implementation-defined, so saturate first.
	if ns >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
