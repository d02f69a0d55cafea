package middleware

import (
	"net/http"
	"strconv"
	"time"
)

// SetStandardHeaders sets on h the rate-limit headers of d, replacing any
// there (see the package doc for their values):
//
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 42
//	X-RateLimit-Reset: 35
//	RateLimit-Policy: "free";q=100;w=60
//	RateLimit: "free";r=42;t=35
//
// and on a rate or concurrency refusal (or ReasonUnavailable) Retry-After
// in seconds. The last two are the structured fields of
// draft-ietf-httpapi-ratelimit-headers-10: one list member per rated rule,
// the deciding rule first. A decision without a rated rule sets nothing
// but a refusal's Retry-After. It is what the Limiter sends without
// [WithHeaders], and may be called from such a hook.
func SetStandardHeaders(h http.Header, d Decision) {
	// The values are built in one buffer, made one string and sliced, and
	// set in the map under their canonical keys: h.Set would canonicalize
	// and allocate each (the benchmarks of bench_test.go).
	var arr [512]byte
	b := arr[:0]
	var ends [6]int
	var keys [6]string
	n := 0
	if !d.Allowed && d.RetryAfter > 0 {
		b = strconv.AppendInt(b, ceilSeconds(d.RetryAfter), 10)
		keys[n], ends[n] = hRetryAfter, len(b)
		n++
	}
	if d.Rule != "" {
		b = strconv.AppendInt(b, d.Limit, 10)
		keys[n], ends[n] = hLimit, len(b)
		n++
		if d.QuotaKnown || !d.Allowed {
			b = strconv.AppendInt(b, d.Remaining, 10)
			keys[n], ends[n] = hRemaining, len(b)
			n++
			b = strconv.AppendInt(b, ceilSeconds(d.Reset), 10)
			keys[n], ends[n] = hReset, len(b)
			n++
		}
		// A rule with a Concurrency alone has no policy to tell.
		if withPolicy := appendFields(b, &d, true); len(withPolicy) > len(b) {
			b = withPolicy
			keys[n], ends[n] = hPolicy, len(b)
			n++
			if d.QuotaKnown {
				b = appendFields(b, &d, false)
				keys[n], ends[n] = hState, len(b)
				n++
			}
		}
	}
	if !d.QuotaKnown {
		delete(h, hState)
	}
	if n == 0 {
		return
	}
	str := string(b)
	vals := make([]string, n)
	from := 0
	for i := range n {
		vals[i] = str[from:ends[i]]
		h[keys[i]] = vals[i : i+1 : i+1]
		from = ends[i]
	}
}

// The headers' canonical keys (http.CanonicalHeaderKey), set directly.
var (
	hRetryAfter = http.CanonicalHeaderKey("Retry-After")
	hLimit      = http.CanonicalHeaderKey("X-RateLimit-Limit")
	hRemaining  = http.CanonicalHeaderKey("X-RateLimit-Remaining")
	hReset      = http.CanonicalHeaderKey("X-RateLimit-Reset")
	hPolicy     = http.CanonicalHeaderKey("RateLimit-Policy")
	hState      = http.CanonicalHeaderKey("RateLimit")
)

// appendFields appends to b the RateLimit-Policy field of d (policy set)
// or its RateLimit field: one member per rated rule, d.Rule's first.
func appendFields(b []byte, d *Decision, policy bool) []byte {
	first := true
	for pass := range 2 {
		for i := range d.Rules {
			s := &d.Rules[i]
			if !s.rated() || (s.Name == d.Rule) != (pass == 0) {
				continue
			}
			if !first {
				b = append(b, ", "...)
			}
			first = false
			b = appendMember(b, s, policy)
		}
	}
	return b
}

// appendMember appends s's member of the RateLimit-Policy field (policy
// set) or of the RateLimit field.
func appendMember(b []byte, s *RuleState, policy bool) []byte {
	b = appendSFString(b, s.Name)
	if policy {
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, s.Limit, 10)
		b = append(b, ";w="...)
		return strconv.AppendInt(b, ceilSeconds(s.Window), 10)
	}
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, s.Remaining, 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(s.Reset), 10)
}

// appendSFString appends s as a structured field String (RFC 9651):
// quoted, with '"' and '\' escaped. Rule names are checked to be
// printable ASCII when the Limiter is made (checkName).
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// ceilSeconds returns d in whole seconds, rounded up: a client told to come
// back in 0 seconds would come back too soon.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}
