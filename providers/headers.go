package providers

import (
	"net/http"
	"strings"

	"github.com/throttlekit/throttle/header"
)

// maxValueLen bounds every header value a dialect reads.
const maxValueLen = 256

// The names the dialects give themselves in [header.Signal.Dialect] when a
// response holds one of their provider's fields: each is the Name of the
// provider's [Preset]. They are constants, so that an exporter counting
// rate-limited responses by dialect has at most these values.
const (
	anthropicName  = "anthropic"
	discordName    = "discord"
	gitHubName     = "github"
	hubSpotName    = "hubspot"
	openAIName     = "openai"
	salesforceName = "salesforce"
	shopifyName    = "shopify"
	stripeName     = "stripe"
	twilioName     = "twilio"
)

// Every key this package looks up is canonical, made so once where it is
// declared: a direct lookup h[key] then finds exactly what
// [header.Value] and h.Get find, without canonicalising the name
// again on every response.

// value returns the first line of the field with canonical key key,
// without surrounding whitespace, or "" when it is absent or longer than
// maxValueLen: what header.Value returns for that name.
func value(h http.Header, key string) string { return boundedValue(h, key, maxValueLen) }

// boundedValue is [value] with a bound of maxLen bytes.
func boundedValue(h http.Header, key string, maxLen int) string {
	v := h[key]
	if len(v) == 0 || len(v[0]) > maxLen {
		return ""
	}
	return strings.TrimSpace(v[0])
}

// hasKeyPrefix reports whether h holds a field whose canonical key starts
// with prefix. A dialect reading many fields that share a prefix asks it
// first: one pass over a response's keys costs less than a lookup of each
// field in a response that has none of them.
func hasKeyPrefix(h http.Header, prefix string) bool {
	for k := range h {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// quotaFields names a quota that a dialect reads from three fields, and
// holds the canonical keys of its limit, remaining and reset fields.
type quotaFields struct {
	name, unit              string
	limit, remaining, reset string
}

// ParseUsedOfLimit parses a "used/limit" ratio such as Shopify's "32/40"
// or Salesforce's "18/5000" into its two non-negative counts.
func ParseUsedOfLimit(v string) (used, limit int64, ok bool) {
	u, l, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	used, ok1 := header.ParseCount(u)
	limit, ok2 := header.ParseCount(l)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return used, limit, true
}
