package providers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestHubSpotDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "hubspot private app", dialect: providers.HubSpot, status: 200,
			h: hdr("X-HubSpot-RateLimit-Daily", "650000", "X-HubSpot-RateLimit-Daily-Remaining", "649000",
				"X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Max", "190",
				"X-HubSpot-RateLimit-Remaining", "189"),
			want: header.Signal{Quotas: []header.Quota{
				{Name: "interval", Unit: "requests", Limit: 190, HasLimit: true, Remaining: 189, HasRemaining: true, Window: 10 * time.Second},
				{Name: "daily", Unit: "requests", Limit: 650000, HasLimit: true, Remaining: 649000, HasRemaining: true, Window: 24 * time.Hour},
			}},
		},
		{
			name: "hubspot oauth app, deprecated secondly", dialect: providers.HubSpot, status: 429,
			h: hdr("X-HubSpot-RateLimit-Max", "100", "X-HubSpot-RateLimit-Remaining", "0",
				"X-HubSpot-RateLimit-Secondly", "10", "X-HubSpot-RateLimit-Secondly-Remaining", "0",
				"X-HubSpot-RateLimit-Interval-Milliseconds", "-1"),
			want: header.Signal{Limited: true, Quotas: []header.Quota{
				{Name: "interval", Unit: "requests", Limit: 100, HasLimit: true, Remaining: 0, HasRemaining: true},
				{Name: "secondly", Unit: "requests", Limit: 10, HasLimit: true, Remaining: 0, HasRemaining: true, Window: time.Second},
			}},
		},
	})
}

func FuzzHubSpotHeaders(f *testing.F) {
	f.Add("190", "189", "10000", "650000", "649000")
	f.Add("-1", "99999999999999999999", "99999999999999999", "x", "")
	f.Fuzz(func(t *testing.T, maxv, remaining, interval, daily, dailyRemaining string) {
		h := http.Header{
			"X-Hubspot-Ratelimit-Max": {maxv}, "X-Hubspot-Ratelimit-Remaining": {remaining},
			"X-Hubspot-Ratelimit-Interval-Milliseconds": {interval},
			"X-Hubspot-Ratelimit-Daily":                 {daily}, "X-Hubspot-Ratelimit-Daily-Remaining": {dailyRemaining},
		}
		checkDialectSignal(t, header.Parse(429, h, time.Unix(0, 0), time.Minute, providers.HubSpot), time.Minute)
	})
}
