package providers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
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
			want: header.Signal{Dialect: "hubspot", Quotas: []header.Quota{
				{Name: "interval", Unit: "requests", Limit: 190, HasLimit: true, Remaining: 189, HasRemaining: true, Window: 10 * time.Second},
				{Name: "daily", Unit: "requests", Limit: 650000, HasLimit: true, Remaining: 649000, HasRemaining: true, Window: 24 * time.Hour},
			}},
		},
		{
			name: "hubspot oauth app, deprecated secondly", dialect: providers.HubSpot, status: 429,
			h: hdr("X-HubSpot-RateLimit-Max", "100", "X-HubSpot-RateLimit-Remaining", "0",
				"X-HubSpot-RateLimit-Secondly", "10", "X-HubSpot-RateLimit-Secondly-Remaining", "0",
				"X-HubSpot-RateLimit-Interval-Milliseconds", "-1"),
			want: header.Signal{Limited: true, Dialect: "hubspot", Quotas: []header.Quota{
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

func TestHubSpotPreset(t *testing.T) {
	ctx := context.Background()
	hs := providers.HubSpotPreset(providers.HubSpotConfig{})
	day := 24 * time.Hour
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"starter", hs, map[string]throttle.Limit{
				"hubspot-ten-secondly": lim(100, 10*time.Second, 1), "hubspot-daily": lim(250000, day, 2500), "hubspot-search": lim(4, time.Second, 1),
			}},
			{"professional", providers.HubSpotPreset(providers.HubSpotConfig{Tier: providers.HubSpotProfessional}), map[string]throttle.Limit{
				"hubspot-ten-secondly": lim(190, 10*time.Second, 1), "hubspot-daily": lim(650000, day, 6500),
			}},
			{"enterprise", providers.HubSpotPreset(providers.HubSpotConfig{Tier: providers.HubSpotEnterprise}), map[string]throttle.Limit{
				"hubspot-ten-secondly": lim(190, 10*time.Second, 1), "hubspot-daily": lim(1000000, day, 10000),
			}},
			{"unknown tier is starter", providers.HubSpotPreset(providers.HubSpotConfig{Tier: 9}), map[string]throttle.Limit{
				"hubspot-ten-secondly": lim(100, 10*time.Second, 1),
			}},
			{"capacity pack, overridden", providers.HubSpotPreset(providers.HubSpotConfig{Tier: providers.HubSpotEnterprise, TenSecondly: 250, Daily: 2000000, SearchPerSecond: 5}), map[string]throttle.Limit{
				"hubspot-ten-secondly": lim(250, 10*time.Second, 1), "hubspot-daily": lim(2000000, day, 20000), "hubspot-search": lim(5, time.Second, 1),
			}},
		})
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"crm read", hs, newReq(ctx, "GET", "https://api.hubapi.com/crm/v3/objects/contacts/1", ""), []string{"hubspot-ten-secondly", "hubspot-daily"}},
			{"crm search", hs, newReq(ctx, "POST", "https://api.hubapi.com/crm/v3/objects/contacts/search", "{}"), []string{"hubspot-ten-secondly", "hubspot-daily", "hubspot-search"}},
			{"other host", hs, newReq(ctx, "GET", "https://api.example.com/crm/v3/objects/contacts/search", ""), nil},
		})
	})
	t.Run("keys", func(t *testing.T) {
		search := func(token string) *http.Request {
			return newReq(ctx, "POST", "https://api.hubapi.com/crm/v3/objects/deals/search", "{}", "Authorization", "Bearer "+token)
		}
		checkKeys(t, []keyCase{
			{"search per token", hs, "hubspot-search", search("a"), search("b"), false},
			{"one account's daily", hs, "hubspot-daily", search("a"), search("b"), true},
		})
	})
	if hs.Dialect == nil {
		t.Error("no dialect: the preset should read X-HubSpot-RateLimit-*")
	}
}
