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

func TestSalesforceDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "salesforce api-usage", dialect: providers.Salesforce, status: 200,
			h:    hdr("Sforce-Limit-Info", "api-usage=18/5000"),
			want: header.Signal{Dialect: "salesforce", Quotas: []header.Quota{{Name: "api-usage", Unit: "requests", Limit: 5000, HasLimit: true, Remaining: 4982, HasRemaining: true}}},
		},
		{
			name: "salesforce newer form, exhausted 403", dialect: providers.Salesforce, status: 403,
			h: hdr("Sforce-Limit-Info", "api-usage=5000/5000; api-bursts=1/750, per-app-api-usage=17/250(appName=x), junk, x=1/"),
			want: header.Signal{Limited: true, Dialect: "salesforce", Quotas: []header.Quota{
				{Name: "api-usage", Unit: "requests", Limit: 5000, HasLimit: true, Remaining: 0, HasRemaining: true},
				{Name: "api-bursts", Unit: "requests", Limit: 750, HasLimit: true, Remaining: 749, HasRemaining: true},
				{Name: "per-app-api-usage", Unit: "requests", Limit: 250, HasLimit: true, Remaining: 233, HasRemaining: true},
			}},
		},
	})
}

func FuzzSalesforceLimitInfo(f *testing.F) {
	for _, s := range []string{"api-usage=18/5000", "api-usage=18/5000; api-bursts=1/750", "per-app-api-usage=17/250(appName=x)", "=;,(/", "a=1/2,a=3/4"} {
		f.Add(403, s)
	}
	f.Fuzz(func(t *testing.T, status int, v string) {
		s := header.Parse(status, http.Header{"Sforce-Limit-Info": {v}}, time.Unix(0, 0), time.Minute, providers.Salesforce)
		checkDialectSignal(t, s, time.Minute)
	})
}

func TestSalesforcePreset(t *testing.T) {
	ctx := context.Background()
	sf := providers.SalesforcePreset(providers.SalesforceConfig{})
	day := 24 * time.Hour
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"base", sf, map[string]throttle.Limit{"salesforce-daily": lim(100000, day, 1000)}},
			{"enterprise licenses", providers.SalesforcePreset(providers.SalesforceConfig{Licenses: 50}), map[string]throttle.Limit{"salesforce-daily": lim(150000, day, 1500)}},
			{"unlimited licenses", providers.SalesforcePreset(providers.SalesforceConfig{Licenses: 20, PerLicense: 5000}), map[string]throttle.Limit{"salesforce-daily": lim(200000, day, 2000)}},
			{"the org's figure", providers.SalesforcePreset(providers.SalesforceConfig{Daily: 15000, Licenses: 50}), map[string]throttle.Limit{"salesforce-daily": lim(15000, day, 150)}},
		})
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"rest query", sf, newReq(ctx, "GET", "https://acme.my.salesforce.com/services/data/v60.0/query?q=x", ""), []string{"salesforce-daily"}},
			{"bulk", sf, newReq(ctx, "POST", "https://acme.my.salesforce.com/services/async/60.0/job", "x"), []string{"salesforce-daily"}},
			{"oauth token", sf, newReq(ctx, "POST", "https://login.salesforce.com/services/oauth2/token", "x"), nil},
			{"other host", sf, newReq(ctx, "GET", "https://example.com/services/data/v60.0/query", ""), nil},
			{"one org's host", providers.SalesforcePreset(providers.SalesforceConfig{Host: "acme.my.salesforce.com"}),
				newReq(ctx, "GET", "https://other.my.salesforce.com/services/data/v60.0/query", ""), nil},
		})
	})
	if sf.Dialect == nil {
		t.Error("no dialect: the preset should read Sforce-Limit-Info")
	}
}
