package providers_test

import (
	"fmt"

	"github.com/throttlekit/throttle/providers"
)

// A HubSpot Professional account with the API limit increase: the numbers
// the pack changes are overridden, the others are the tier's.
func ExampleHubSpotPreset() {
	p := providers.HubSpotPreset(providers.HubSpotConfig{
		Tier:        providers.HubSpotProfessional,
		TenSecondly: 250,
		Daily:       1_650_000,
	})
	for _, r := range p.Rules {
		fmt.Printf("%s: %d per %v\n", r.Name, r.Limit.Rate, r.Limit.Period)
	}
	// Output:
	// hubspot-ten-secondly: 250 per 10s
	// hubspot-daily: 1650000 per 24h0m0s
	// hubspot-search: 4 per 1s
}

// An org of 50 Enterprise licenses: 100,000 requests a day and 1,000 per
// license.
func ExampleSalesforcePreset() {
	p := providers.SalesforcePreset(providers.SalesforceConfig{Host: "acme.my.salesforce.com", Licenses: 50})
	r := p.Rule("salesforce-daily")
	fmt.Println(r.Limit.Rate, r.Limit.Period)
	// Output: 150000 24h0m0s
}

// SendGrid counts each v3 endpoint apart; the requests for different
// objects of one endpoint share its bucket.
func ExampleSendGridEndpoint() {
	fmt.Println(providers.SendGridEndpoint("GET", "/v3/templates/d-4ab5"))
	fmt.Println(providers.SendGridEndpoint("GET", "/v3/templates/d-99ff"))
	fmt.Println(providers.SendGridEndpoint("POST", "/v3/marketing/lists"))
	// Output:
	// GET /v3/templates/{id}
	// GET /v3/templates/{id}
	// POST /v3/marketing/lists
}
