package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// HubSpotTier is a HubSpot subscription, which sets a private app's
// limits. The zero value is [HubSpotStarter], the lowest.
type HubSpotTier int

// HubSpot's subscription tiers (developers.hubspot.com/apisbytier and the
// changelog "increasing-our-api-limits", read 2026-11-30).
const (
	// HubSpotStarter is Free and Starter: 100 requests per 10 s and
	// 250,000 a day.
	HubSpotStarter HubSpotTier = iota
	// HubSpotProfessional: 190 requests per 10 s and 650,000 a day.
	HubSpotProfessional
	// HubSpotEnterprise: 190 requests per 10 s and 1,000,000 a day.
	HubSpotEnterprise
)

// hubSpotLimits are each tier's requests per 10 s and per day.
var hubSpotLimits = [...]struct{ tenSecondly, daily int }{
	HubSpotStarter:      {100, 250_000},
	HubSpotProfessional: {190, 650_000},
	HubSpotEnterprise:   {190, 1_000_000},
}

// HubSpotConfig tunes [HubSpotPreset]. The zero value describes one
// private app of a Free or Starter account calling api.hubapi.com.
type HubSpotConfig struct {
	// Host is the host the rules match. If empty, api.hubapi.com.
	Host string

	// Tier is the account's subscription. An unknown value is
	// HubSpotStarter.
	Tier HubSpotTier

	// TenSecondly is the limit of requests per rolling 10 s. If ≤ 0, the
	// tier's: 100, or 190 for Professional and Enterprise. The API limit
	// increase (capacity pack) raises it to 250.
	TenSecondly int

	// Daily is the limit of requests per day. If ≤ 0, the tier's:
	// 250,000, 650,000 or 1,000,000. Each API limit increase adds
	// 1,000,000.
	Daily int

	// SearchPerSecond is the limit of CRM search requests per second per
	// token. If ≤ 0, 4.
	SearchPerSecond int

	// Key partitions every rule, for a fleet calling several HubSpot
	// accounts: HubSpot counts each app's requests per account. If nil,
	// all requests share one account's buckets. hubspot-search is
	// partitioned by token (the Authorization header, hashed by the
	// Transport) within it.
	Key func(*http.Request) string
}

// HubSpotPreset returns the limits of a HubSpot private app
// (developers.hubspot.com/docs/api/usage-details, the changelog
// "increasing-our-api-limits" and developers.hubspot.com/apisbytier, read
// 2026-11-30):
//
//   - hubspot-ten-secondly: 100 requests per 10 s on Free and Starter, 190
//     on Professional and Enterprise ([HubSpotConfig.TenSecondly]); HubSpot
//     counts a rolling window (its 429 names the policy
//     TEN_SECONDLY_ROLLING), which the default leaky bucket with a burst
//     of 1 never exceeds.
//   - hubspot-daily: 250,000, 650,000 or 1,000,000 requests a day
//     ([HubSpotConfig.Daily]). HubSpot resets it at midnight in the
//     account's time zone, which the preset does not know: a leaky bucket
//     of a day's rate and a burst of 1 % keeps any calendar day under the
//     limit wherever midnight falls.
//   - hubspot-search: 4 CRM search requests per second per token (paths
//     under /crm/ ending in /search). They count in the two rules above
//     too: whether HubSpot counts them there is not confirmed, and
//     counting them is the cautious reading.
//
// Public (OAuth) apps have other limits, which PROVIDERS research could
// not confirm (unconfirmed): set TenSecondly and Daily to what HubSpot
// gives your app. The dialect is [HubSpot], which reads the
// X-HubSpot-RateLimit-* headers of every answer.
func HubSpotPreset(c HubSpotConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.hubapi.com"
	}
	tier := c.Tier
	if tier < HubSpotStarter || tier > HubSpotEnterprise {
		tier = HubSpotStarter
	}
	tenSecondly, daily, search := c.TenSecondly, c.Daily, c.SearchPerSecond
	if tenSecondly <= 0 {
		tenSecondly = hubSpotLimits[tier].tenSecondly
	}
	if daily <= 0 {
		daily = hubSpotLimits[tier].daily
	}
	if search <= 0 {
		search = 4
	}
	return Preset{
		Name: hubSpotName,
		Rules: []throttle.Rule{
			{
				Name:  ruleName("hubspot", "ten-secondly"),
				Limit: throttle.Limit{Rate: tenSecondly, Period: 10 * time.Second, Burst: 1},
				Match: throttle.Match{Host: host},
				Key:   c.Key,
			},
			{
				Name:  ruleName("hubspot", "daily"),
				Limit: throttle.Limit{Rate: daily, Period: 24 * time.Hour, Burst: burstOf(daily)},
				Match: throttle.Match{Host: host},
				Key:   c.Key,
			},
			{
				Name:  ruleName("hubspot", "search"),
				Limit: throttle.Limit{Rate: search, Period: time.Second, Burst: 1},
				Match: throttle.Match{Host: host, Func: isHubSpotSearch},
				Key:   withKey(c.Key, throttle.KeyHeader("Authorization")),
			},
		},
		Dialect: HubSpot,
	}
}

// isHubSpotSearch reports whether r is a CRM search request
// (POST /crm/v3/objects/{objectType}/search and its kin).
func isHubSpotSearch(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return strings.HasPrefix(p, "/crm/") && strings.HasSuffix(p, "/search")
}

// HubSpot reads HubSpot's rate-limit headers into up to three quotas:
// "interval" from X-HubSpot-RateLimit-Max, -Remaining and
// -Interval-Milliseconds (the rolling window, usually 10000 ms); "daily"
// from X-HubSpot-RateLimit-Daily and -Daily-Remaining (absent for OAuth
// apps; the window is 24 h, resetting at midnight in the account's time
// zone, which the headers do not give, so no reset is reported); and the
// deprecated "secondly" from -Secondly and -Secondly-Remaining. It names
// itself "hubspot" in header.Signal.Dialect when it read a quota.
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
// limit and remaining when either is valid, and then names the dialect.
func setHubSpotQuota(h http.Header, s *header.Signal, name, limit, remaining string, window time.Duration) {
	q := header.Quota{Name: name, Unit: "requests", Window: window}
	q.Limit, q.HasLimit = header.ParseCount(value(h, limit))
	q.Remaining, q.HasRemaining = header.ParseCount(value(h, remaining))
	if q.HasLimit || q.HasRemaining {
		s.SetQuota(q)
		s.Dialect = hubSpotName
	}
}
