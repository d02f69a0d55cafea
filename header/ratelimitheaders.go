package header

import (
	"encoding/base64"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Thresholds of the magnitude rule used by [ParseReset].
const (
	// resetUnixSeconds: 1e9 seconds is 2001-09-09 as a Unix time, and
	// almost 32 years as a delta; no server names a 32-year delta.
	resetUnixSeconds = 1e9
	// resetUnixMillis: 1e12 seconds as a Unix time is year 33658, and
	// 1e12 ms is 2001-09-09, so such values are Unix milliseconds.
	resetUnixMillis = 1e12
)

// ParseCount parses a non-negative decimal integer count (a limit, a
// remaining or used count). Signs, fractions, overflow beyond int64
// ("99999999999999999999"), empty values and values longer than 256 bytes
// are rejected.
func ParseCount(value string) (int64, bool) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxNumericHeaderLen {
		return 0, false
	}
	for i := 0; i < len(value); i++ {
		if value[i] < '0' || value[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// ParseReset parses an X-RateLimit-Reset style value, whose unit
// differs between servers, into the time until the reset, relative to now.
// The unit is told apart by magnitude:
//
//   - v >= 1e12 is a Unix time in milliseconds (1e12 ms is 2001-09-09);
//   - v >= 1e9 is a Unix time in seconds, possibly with decimals (GitHub
//     "1372700873", Discord "1470173023.123"): 1e9 s is 2001-09-09 as a
//     date but almost 32 years as a delta, which no server sends;
//   - smaller values are delta-seconds ("60", "0.5").
//
// A reset in the past gives 0. The result is never negative and saturates
// rather than overflowing; [Parse] caps it. Values that are not a
// plain non-negative decimal are rejected (see [ParseDelaySeconds]).
func ParseReset(value string, now time.Time) (time.Duration, bool) {
	v, ok := parseDecimal(value)
	if !ok {
		return 0, false
	}
	if v < resetUnixSeconds {
		return SecondsToDuration(v), true
	}
	// Epoch values are converted with integer arithmetic: float64 seconds
	// would lose ~0.1 µs and turn "…023.123" into 23.122999907s.
	whole, frac, _ := strings.Cut(strings.TrimSpace(value), ".")
	if len(whole) > 18 { // beyond int64: a date millions of years ahead
		return time.Duration(math.MaxInt64), true
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	if len(frac) > 9 {
		frac = frac[:9]
	}
	fracNanos := int64(0)
	if frac != "" {
		fracNanos, err = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
	}
	var sec, nsec int64
	if v >= resetUnixMillis {
		sec, nsec = n/1000, (n%1000)*int64(time.Millisecond)+fracNanos/1000
	} else {
		sec, nsec = n, fracNanos
	}
	// time.Unix overflows its internal representation near MaxInt64
	// seconds; anything past year ~31 million is "forever" anyway.
	const maxUnixSeconds = 1e15
	if sec > maxUnixSeconds {
		return time.Duration(math.MaxInt64), true
	}
	return max(time.Unix(sec, nsec).Sub(now), 0), true
}

// parseXRateLimit reads the de-facto X-RateLimit-* fields of the families
// in f into a quota named "requests": X-RateLimit-Limit, -Remaining, -Used,
// -Reset (see [ParseReset] for its units) and -Reset-After (Discord, float
// delta-seconds, preferred over -Reset when both are valid). When none of
// them is present (or f lacks fieldsXRateLimit) it reads X/Twitter's
// x-rate-limit-limit, -remaining and -reset instead. When -Remaining is
// absent but -Limit and -Used are present, Remaining is Limit-Used (at
// least 0); Remaining without Limit is still reported. It returns false
// when no field was usable. Only the first line of each field is used;
// values over 256 bytes are ignored.
func parseXRateLimit(h http.Header, now time.Time, f fieldSet) (Quota, bool) {
	if f&fieldsXRateLimit != 0 {
		if q, ok := parseXRateLimitFields(h, now, &xRateLimitKeys); ok {
			return q, true
		}
	}
	if f&fieldsXRateLimitX != 0 {
		return parseXRateLimitFields(h, now, &xRateLimitXKeys)
	}
	return Quota{Name: "requests", Unit: "requests"}, false
}

// xRateLimitFields are the canonical keys of one family of X-RateLimit-*
// style fields.
type xRateLimitFields struct {
	limit, remaining, used, resetAfter, reset string
}

var (
	xRateLimitKeys = xRateLimitFields{
		limit:      prefixXRateLimit + "Limit",
		remaining:  prefixXRateLimit + "Remaining",
		used:       prefixXRateLimit + "Used",
		resetAfter: prefixXRateLimit + "Reset-After",
		reset:      prefixXRateLimit + "Reset",
	}
	xRateLimitXKeys = xRateLimitFields{
		limit:      prefixXRateLimitX + "Limit",
		remaining:  prefixXRateLimitX + "Remaining",
		used:       prefixXRateLimitX + "Used",
		resetAfter: prefixXRateLimitX + "Reset-After",
		reset:      prefixXRateLimitX + "Reset",
	}
)

func parseXRateLimitFields(h http.Header, now time.Time, k *xRateLimitFields) (Quota, bool) {
	q := Quota{Name: "requests", Unit: "requests"}
	q.Limit, q.HasLimit = ParseCount(headerFirst(h, k.limit, maxNumericHeaderLen))
	q.Remaining, q.HasRemaining = ParseCount(headerFirst(h, k.remaining, maxNumericHeaderLen))
	if !q.HasRemaining && q.HasLimit {
		if used, ok := ParseCount(headerFirst(h, k.used, maxNumericHeaderLen)); ok {
			q.Remaining, q.HasRemaining = max(q.Limit-used, 0), true
		}
	}
	if d, ok := ParseDelaySeconds(headerFirst(h, k.resetAfter, maxNumericHeaderLen)); ok {
		q.Reset, q.HasReset = d, true
	} else if d, ok := ParseReset(headerFirst(h, k.reset, maxNumericHeaderLen), now); ok {
		q.Reset, q.HasReset = d, true
	}
	return q, q.HasLimit || q.HasRemaining || q.HasReset
}

// parseIETF reads the IETF RateLimit and RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers) in whichever form the server sends:
//
//   - -10 (RFC 9651 Lists): `RateLimit-Policy: "burst";q=100;w=60` and
//     `RateLimit: "burst";r=50;t=30`. Each policy item is a String name with
//     q (required Integer quota), qu (String unit), w (Integer seconds > 0)
//     and pk (Byte Sequence); each RateLimit item has r (required Integer
//     remaining), t (Integer seconds until reset) and pk. Items are matched
//     by name into one Quota each; an item of the wrong type or missing its
//     required parameter is skipped, and a field that does not parse is
//     ignored whole, as the draft requires. Unit quirks of other drafts are
//     mapped: "request" → "requests", "bytes" (-08) → "content-bytes".
//   - -07 (Dictionary): `RateLimit: limit=100, remaining=50, reset=5` with
//     `RateLimit-Policy: 100;w=10`, giving one quota named "default".
//   - -06 and earlier: separate RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset fields (any case, as Resend's lowercase ones), with
//     RateLimit-Policy `10;w=1, 50;w=60`; quota "default".
//
// In the older forms the reset follows [ParseReset] (delta
// seconds, but epoch values some servers send are recognised) and the
// policy whose quota equals the limit gives the window. Lines of a repeated
// field are joined (RFC 9651 §4.2); a field over 4 KiB is ignored. At most
// 64 quotas are returned.
func parseIETF(h http.Header, now time.Time) []Quota {
	policies, policiesOK := sfList(h, keyRateLimitPolicy)
	limits, limitsOK := sfList(h, keyRateLimit)
	if (policiesOK && hasStringItem(policies)) || (limitsOK && hasStringItem(limits)) {
		return parseIETF10(policies, limits)
	}
	q, ok := parseIETFLegacy(h, now, policies)
	if !ok {
		return nil
	}
	return []Quota{q}
}

func sfList(h http.Header, key string) (httpsfv.List, bool) {
	v, ok := headerJoined(h, key, maxStructuredHeaderLen)
	if !ok {
		return nil, false
	}
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		return nil, false
	}
	return l, true
}

func hasStringItem(l httpsfv.List) bool {
	for _, m := range l {
		if it, ok := m.(httpsfv.Item); ok {
			if _, ok := it.Value.(string); ok {
				return true
			}
		}
	}
	return false
}

func parseIETF10(policies, limits httpsfv.List) []Quota {
	var out []Quota
	index := make(map[string]int)
	find := func(name string) *Quota {
		if i, ok := index[name]; ok {
			return &out[i]
		}
		if len(out) >= maxSignalQuotas {
			return nil
		}
		index[name] = len(out)
		out = append(out, Quota{Name: name, Unit: "requests"})
		return &out[len(out)-1]
	}
	for _, m := range policies {
		name, p, ok := sfNamedItem(m)
		if !ok {
			continue
		}
		limit, ok := sfInt(p, "q")
		if !ok || limit < 0 {
			continue
		}
		q := find(name)
		if q == nil {
			break
		}
		q.Limit, q.HasLimit = limit, true
		if qu, ok := sfString(p, "qu"); ok {
			q.Unit = ietfUnit(qu)
		}
		if w, ok := sfInt(p, "w"); ok && w > 0 {
			q.Window = SecondsToDuration(float64(w))
		}
		if pk, ok := sfBytes(p, "pk"); ok {
			q.PartitionKey = pk
		}
	}
	for _, m := range limits {
		name, p, ok := sfNamedItem(m)
		if !ok {
			continue
		}
		r, ok := sfInt(p, "r")
		if !ok || r < 0 {
			continue
		}
		q := find(name)
		if q == nil {
			break
		}
		q.Remaining, q.HasRemaining = r, true
		if t, ok := sfInt(p, "t"); ok && t >= 0 {
			q.Reset, q.HasReset = SecondsToDuration(float64(t)), true
		}
		if pk, ok := sfBytes(p, "pk"); ok {
			q.PartitionKey = pk
		}
	}
	return out
}

// ietfUnit maps the quota-unit quirks of different drafts to one spelling.
func ietfUnit(qu string) string {
	switch qu {
	case "", "request", "requests":
		return "requests"
	case "bytes", "content-bytes":
		return "content-bytes"
	case "concurrent-requests":
		return "concurrent-requests"
	}
	if len(qu) > 64 {
		return "requests"
	}
	return qu
}

func sfNamedItem(m httpsfv.Member) (string, *httpsfv.Params, bool) {
	it, ok := m.(httpsfv.Item)
	if !ok || it.Params == nil {
		return "", nil, false
	}
	name, ok := it.Value.(string)
	return name, it.Params, ok
}

func sfInt(p *httpsfv.Params, key string) (int64, bool) {
	v, ok := p.Get(key)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	return n, ok
}

func sfString(p *httpsfv.Params, key string) (string, bool) {
	v, ok := p.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func sfBytes(p *httpsfv.Params, key string) (string, bool) {
	v, ok := p.Get(key)
	if !ok {
		return "", false
	}
	b, ok := v.([]byte)
	if !ok {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

// parseIETFLegacy reads the -07 Dictionary form, else the -06 fields.
func parseIETFLegacy(h http.Header, now time.Time, policies httpsfv.List) (Quota, bool) {
	q := Quota{Name: "default", Unit: "requests"}
	if v, ok := headerJoined(h, keyRateLimit, maxStructuredHeaderLen); ok {
		if d, err := httpsfv.UnmarshalDictionary([]string{v}); err == nil {
			q.Limit, q.HasLimit = sfDictInt(d, "limit")
			q.Remaining, q.HasRemaining = sfDictInt(d, "remaining")
			if r, ok := sfDictInt(d, "reset"); ok {
				q.Reset, q.HasReset = ParseReset(strconv.FormatInt(r, 10), now)
			}
		}
	}
	if !q.HasLimit && !q.HasRemaining && !q.HasReset {
		q.Limit, q.HasLimit = ParseCount(headerFirst(h, keyRateLimitLimit, maxNumericHeaderLen))
		q.Remaining, q.HasRemaining = ParseCount(headerFirst(h, keyRateLimitRemaining, maxNumericHeaderLen))
		q.Reset, q.HasReset = ParseReset(headerFirst(h, keyRateLimitReset, maxNumericHeaderLen), now)
	}
	// Legacy RateLimit-Policy: Integer items (the quota) with a w param.
	// The policy whose quota equals the limit gives the window; with no
	// limit known, a single policy gives both.
	type legacyPolicy struct {
		quota  int64
		params *httpsfv.Params
	}
	var legacy []legacyPolicy
	for _, m := range policies {
		if it, ok := m.(httpsfv.Item); ok && it.Params != nil {
			if n, ok := it.Value.(int64); ok && n >= 0 {
				legacy = append(legacy, legacyPolicy{n, it.Params})
			}
		}
	}
	for _, p := range legacy {
		if q.HasLimit && p.quota != q.Limit {
			continue
		}
		if !q.HasLimit {
			if len(legacy) > 1 {
				break // cannot tell which policy applies
			}
			q.Limit, q.HasLimit = p.quota, true
		}
		if w, ok := sfInt(p.params, "w"); ok && w > 0 {
			q.Window = SecondsToDuration(float64(w))
		}
		break
	}
	return q, q.HasLimit || q.HasRemaining || q.HasReset
}

func sfDictInt(d *httpsfv.Dictionary, key string) (int64, bool) {
	m, ok := d.Get(key)
	if !ok {
		return 0, false
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return 0, false
	}
	n, ok := it.Value.(int64)
	if !ok || n < 0 {
		return 0, false
	}
	return n, true
}
