package providers

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle/header"
)

// HubSpot reads HubSpot's rate-limit headers into up to three quotas:
// "interval" from X-HubSpot-RateLimit-Max, -Remaining and
// -Interval-Milliseconds (the rolling window, usually 10000 ms); "daily"
// from X-HubSpot-RateLimit-Daily and -Daily-Remaining (absent for OAuth
// apps; the window is 24 h, resetting at midnight in the account's time
// zone, which the headers do not give, so no reset is reported); and the
// deprecated "secondly" from -Secondly and -Secondly-Remaining.
//
// Source: developers.hubspot.com/docs/api/usage-details.
var HubSpot header.Dialect = header.DialectFunc(parseHubSpot)

// hubSpotPrefix begins the key of every field the HubSpot dialect reads.
const hubSpotPrefix = "X-Hubspot-Ratelimit-"

// Canonical keys of the fields the HubSpot dialect reads.
var (
	hubSpotIntervalMillis    = http.CanonicalHeaderKey(hubSpotPrefix + "Interval-Milliseconds")
	hubSpotMax               = http.CanonicalHeaderKey(hubSpotPrefix + "Max")
	hubSpotRemaining         = http.CanonicalHeaderKey(hubSpotPrefix + "Remaining")
	hubSpotDaily             = http.CanonicalHeaderKey(hubSpotPrefix + "Daily")
	hubSpotDailyRemaining    = http.CanonicalHeaderKey(hubSpotPrefix + "Daily-Remaining")
	hubSpotSecondly          = http.CanonicalHeaderKey(hubSpotPrefix + "Secondly")
	hubSpotSecondlyRemaining = http.CanonicalHeaderKey(hubSpotPrefix + "Secondly-Remaining")
)

func parseHubSpot(_ int, h http.Header, _ time.Time, s *header.Signal) {
	if !hasKeyPrefix(h, hubSpotPrefix) {
		return
	}
	var interval time.Duration
	if ms, ok := header.ParseCount(value(h, hubSpotIntervalMillis)); ok {
		interval = header.SecondsToDuration(float64(ms) / 1000)
	}
	setHubSpotQuota(h, s, "interval", hubSpotMax, hubSpotRemaining, interval)
	setHubSpotQuota(h, s, "daily", hubSpotDaily, hubSpotDailyRemaining, 24*time.Hour)
	setHubSpotQuota(h, s, "secondly", hubSpotSecondly, hubSpotSecondlyRemaining, time.Second)
}

// setHubSpotQuota sets the quota name from the fields with canonical keys
// limit and remaining when either is valid.
func setHubSpotQuota(h http.Header, s *header.Signal, name, limit, remaining string, window time.Duration) {
	q := header.Quota{Name: name, Unit: "requests", Window: window}
	q.Limit, q.HasLimit = header.ParseCount(value(h, limit))
	q.Remaining, q.HasRemaining = header.ParseCount(value(h, remaining))
	if q.HasLimit || q.HasRemaining {
		s.SetQuota(q)
	}
}
