package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// SalesforceConfig tunes [SalesforcePreset]. The zero value describes one
// org with the base daily allocation, called on any host under
// salesforce.com.
type SalesforceConfig struct {
	// Host is the host the rules match, such as
	// "mycompany.my.salesforce.com". If empty, "*.salesforce.com": every
	// org's My Domain and instance hosts.
	Host string

	// Daily is the org's allocation of API requests per rolling 24 h. If
	// ≤ 0, 100,000 plus Licenses × PerLicense (unconfirmed: a secondary
	// source). The Sforce-Limit-Info header of every answer tells the
	// org's real figure (api-usage=used/limit), which the dialect reads.
	Daily int

	// Licenses is the org's number of user licenses, each adding
	// PerLicense requests a day to the base of 100,000 when Daily is ≤ 0.
	Licenses int

	// PerLicense is the requests a day each license adds. If ≤ 0, 1,000
	// (Enterprise Edition; Unlimited Edition adds 5,000), unconfirmed: a
	// secondary source.
	PerLicense int

	// Key partitions the rule, for a fleet calling several orgs, each with
	// its own allocation. If nil, all requests share one org's bucket.
	Key func(*http.Request) string
}

// SalesforcePreset returns the daily API request allocation of a
// Salesforce org (PROVIDERS research, read 2026-11-30: the numbers are a
// secondary source's, unconfirmed; Salesforce's "API Request Limits and
// Allocations" page is the primary one):
//
//   - salesforce-daily: 100,000 requests plus 1,000 per license
//     (Enterprise) over a rolling 24 h ([SalesforceConfig.Daily],
//     Licenses, PerLicense), every request under /services/ (REST,
//     SOAP, Bulk) but the OAuth endpoints (/services/oauth2/), as a leaky
//     bucket of that rate with a burst of 1 %: any 24 h stays under it.
//
// Salesforce's limit of 25 concurrent long-running requests (≥ 20 s; 5 in
// Developer and Trial orgs) is not a rule: whether a request will run
// long is not known when it is sent (docs/CONCURRENCY.md). The dialect is
// [Salesforce]: an exhausted api-usage in a 403 pauses the fleet.
func SalesforcePreset(c SalesforceConfig) Preset {
	host := c.Host
	if host == "" {
		host = "*.salesforce.com"
	}
	daily := c.Daily
	if daily <= 0 {
		per := c.PerLicense
		if per <= 0 {
			per = 1000
		}
		daily = 100_000 + max(c.Licenses, 0)*per
	}
	return Preset{
		Name: salesforceName,
		Rules: []throttle.Rule{{
			Name:  ruleName("salesforce", "daily"),
			Limit: throttle.Limit{Rate: daily, Period: 24 * time.Hour, Burst: burstOf(daily)},
			Match: throttle.Match{Host: host, PathPrefix: "/services/", Func: func(r *http.Request) bool {
				return !strings.HasPrefix(r.URL.Path, "/services/oauth2/")
			}},
			Key: c.Key,
		}},
		Dialect: Salesforce,
	}
}

// maxLimitInfoLen bounds Sforce-Limit-Info, which may list several
// counters.
const maxLimitInfoLen = 1024

// Salesforce reads Sforce-Limit-Info ("api-usage=18/5000", newer versions
// add "; api-bursts=1/750" and "per-app-api-usage=17/250(appName=x)";
// items may be separated by ';' or ',') into one quota per counter, named
// after it, with Remaining = limit - used. A 403 whose api-usage is
// exhausted is Limited (REQUEST_LIMIT_EXCEEDED); the daily allocation is a
// rolling 24 h, so no reset is reported. It names itself "salesforce" in
// header.Signal.Dialect when it read a counter.
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
		s.Dialect = salesforceName
		if name == "api-usage" && status == http.StatusForbidden && q.Exhausted() {
			s.Limited = true
		}
	}
}
