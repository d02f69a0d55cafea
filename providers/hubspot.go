package providers

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
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
var HubSpot throttle.Dialect = throttle.DialectFunc(parseHubSpot)

func parseHubSpot(_ int, h http.Header, _ time.Time, s *throttle.Signal) {
	const p = "X-Hubspot-Ratelimit-"
	add := func(name, limitField, remainingField string, window time.Duration) {
		q := throttle.Quota{Name: name, Unit: "requests", Window: window}
		q.Limit, q.HasLimit = throttle.ParseCount(value(h, p+limitField))
		q.Remaining, q.HasRemaining = throttle.ParseCount(value(h, p+remainingField))
		if q.HasLimit || q.HasRemaining {
			s.SetQuota(q)
		}
	}
	var interval time.Duration
	if ms, ok := throttle.ParseCount(value(h, p+"Interval-Milliseconds")); ok {
		interval = throttle.SecondsToDuration(float64(ms) / 1000)
	}
	add("interval", "Max", "Remaining", interval)
	add("daily", "Daily", "Daily-Remaining", 24*time.Hour)
	add("secondly", "Secondly", "Secondly-Remaining", time.Second)
}
