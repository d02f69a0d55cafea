package header

import (
	"net/http"
	"time"
)

// Hooks for the tests and fuzz targets of package header_test: the steps
// of Parse they check one by one, and the bounds Parse guarantees.
var (
	ParseRetryAfterMillis = parseRetryAfterMillis
	ParseIETF             = parseIETF
	IsDialectName         = isDialectName
)

// ParseXRateLimit reads both families of X-RateLimit-* fields, as Parse
// does when it holds both.
func ParseXRateLimit(h http.Header, now time.Time) (Quota, bool) {
	return parseXRateLimit(h, now, fieldsXRateLimit|fieldsXRateLimitX)
}

const (
	MaxQuotas      = maxSignalQuotas
	MaxQuotaWindow = maxQuotaWindow
	MaxDialectName = maxDialectNameLen
)
