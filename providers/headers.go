package providers

import (
	"net/http"
	"strings"

	"github.com/throttlekit/throttle"
)

// maxValueLen bounds every header value a dialect reads.
const maxValueLen = 256

func value(h http.Header, name string) string {
	return throttle.HeaderValue(h, name, maxValueLen)
}

// ParseUsedOfLimit parses a "used/limit" ratio such as Shopify's "32/40"
// or Salesforce's "18/5000" into its two non-negative counts.
func ParseUsedOfLimit(v string) (used, limit int64, ok bool) {
	u, l, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	used, ok1 := throttle.ParseCount(u)
	limit, ok2 := throttle.ParseCount(l)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return used, limit, true
}
