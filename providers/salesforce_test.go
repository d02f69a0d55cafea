package providers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestSalesforceDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "salesforce api-usage", dialect: providers.Salesforce, status: 200,
			h:    hdr("Sforce-Limit-Info", "api-usage=18/5000"),
			want: header.Signal{Quotas: []header.Quota{{Name: "api-usage", Unit: "requests", Limit: 5000, HasLimit: true, Remaining: 4982, HasRemaining: true}}},
		},
		{
			name: "salesforce newer form, exhausted 403", dialect: providers.Salesforce, status: 403,
			h: hdr("Sforce-Limit-Info", "api-usage=5000/5000; api-bursts=1/750, per-app-api-usage=17/250(appName=x), junk, x=1/"),
			want: header.Signal{Limited: true, Quotas: []header.Quota{
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
