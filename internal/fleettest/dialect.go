package fleettest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

// dialects are the provider dialects a worker can be given by name
// ([WorkerConfig.Dialects]): the providers package's, under the names its
// shapes use ([Shape.Dialects]).
var dialects = map[string]header.Dialect{
	"anthropic":  providers.Anthropic,
	"discord":    providers.Discord,
	"github":     providers.GitHub,
	"hubspot":    providers.HubSpot,
	"openai":     providers.OpenAI,
	"salesforce": providers.Salesforce,
	"shopify":    providers.Shopify,
	"stripe":     providers.Stripe,
	"twilio":     providers.Twilio,
}

// Dialect returns the provider dialect of that name, as a worker resolves
// [WorkerConfig.Dialects], or false.
func Dialect(name string) (header.Dialect, bool) {
	d, ok := dialects[name]
	return d, ok
}

// dialectsOf resolves names, failing on the first unknown one.
func dialectsOf(names []string) ([]header.Dialect, error) {
	out := make([]header.Dialect, 0, len(names))
	for _, n := range names {
		d, ok := dialects[n]
		if !ok {
			return nil, fmt.Errorf("unknown dialect %q (known: %v)", n, slices.Sorted(maps.Keys(dialects)))
		}
		out = append(out, d)
	}
	return out, nil
}
