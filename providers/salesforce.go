package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle/header"
)

// maxLimitInfoLen bounds Sforce-Limit-Info, which may list several
// counters.
const maxLimitInfoLen = 1024

// Salesforce reads Sforce-Limit-Info ("api-usage=18/5000", newer versions
// add "; api-bursts=1/750" and "per-app-api-usage=17/250(appName=x)";
// items may be separated by ';' or ',') into one quota per counter, named
// after it, with Remaining = limit - used. A 403 whose api-usage is
// exhausted is Limited (REQUEST_LIMIT_EXCEEDED); the daily allocation is a
// rolling 24 h, so no reset is reported.
//
// Source: developer.salesforce.com REST API Developer Guide, "Limit Info
// Header".
var Salesforce header.Dialect = header.DialectFunc(parseSalesforce)

// sforceLimitInfo is the canonical key of the field the Salesforce dialect
// reads.
var sforceLimitInfo = http.CanonicalHeaderKey("Sforce-Limit-Info")

func parseSalesforce(status int, h http.Header, _ time.Time, s *header.Signal) {
	info := boundedValue(h, sforceLimitInfo, maxLimitInfoLen)
	if info == "" {
		return
	}
	for _, item := range strings.FieldsFunc(info, func(r rune) bool { return r == ';' || r == ',' }) {
		name, ratio, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			continue
		}
		if i := strings.IndexByte(ratio, '('); i >= 0 {
			ratio = ratio[:i] // drop "(appName=x)"
		}
		used, limit, ok := ParseUsedOfLimit(ratio)
		if !ok {
			continue
		}
		q := header.Quota{
			Name: name, Unit: "requests",
			Limit: limit, HasLimit: true,
			Remaining: max(limit-used, 0), HasRemaining: true,
		}
		s.SetQuota(q)
		if name == "api-usage" && status == http.StatusForbidden && q.Exhausted() {
			s.Limited = true
		}
	}
}
