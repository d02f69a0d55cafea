package throttletest

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

// StripeConfig tunes [Stripe]. The zero value is one Stripe account in live
// mode with no concurrency cap.
type StripeConfig struct {
	// Test selects test mode (sandboxes): a global rate of 25 requests/s
	// instead of 100.
	Test bool

	// Concurrency, if positive, caps the requests in flight per account
	// (refused with reason global-concurrency) and EndpointConcurrency
	// those per endpoint (endpoint-concurrency). Stripe runs such limiters
	// but publishes no numbers for them, so there are none by default.
	Concurrency         int
	EndpointConcurrency int
}

// Stripe rule names, in the order they are checked.
const (
	StripeGlobal              = "stripe-global"
	StripeEndpoint            = "stripe-endpoint"
	StripeGlobalConcurrency   = "stripe-global-concurrency"
	StripeEndpointConcurrency = "stripe-endpoint-concurrency"
)

// stripeReasons are the Stripe-Rate-Limited-Reason values of the rules.
var stripeReasons = map[string]string{
	StripeGlobal:              "global-rate",
	StripeEndpoint:            "endpoint-rate",
	StripeGlobalConcurrency:   "global-concurrency",
	StripeEndpointConcurrency: "endpoint-concurrency",
}

// Stripe returns a simulated Stripe API (docs.stripe.com/rate-limits, read
// 2026-11):
//
//   - stripe-global: 100 requests/s per account in live mode, 25 in test
//     mode, counted as a sliding log (at most that many in any second: the
//     strictest reading of "per second"; Stripe does not say how it
//     counts);
//   - stripe-endpoint: 25 requests/s per account and endpoint, the
//     default endpoint limit; an endpoint is the method and the path with
//     its object IDs replaced ([providers.StripeEndpoint]);
//   - stripe-global-concurrency and stripe-endpoint-concurrency when
//     [StripeConfig] sets them.
//
// An account is the request's Authorization header (its secret key); every
// request without one shares one account. A refusal is Stripe's: status
// 429, Stripe-Rate-Limited-Reason (global-rate, endpoint-rate,
// global-concurrency, endpoint-concurrency) and the error body
// {"error":{"type":"invalid_request_error","code":"rate_limit",...}};
// Stripe sends no Retry-After and no remaining counts, and nor does the
// profile, except during a [Handler.Pause] (Retry-After, no reason). An
// admitted request is answered 200 with "{}" and a Request-Id.
func Stripe(c StripeConfig) Profile {
	global := 100
	if c.Test {
		global = 25
	}
	account := throttle.KeyHeader("Authorization")
	endpoint := func(r *http.Request) string {
		return account(r) + "\x00" + providers.StripeEndpoint(r.Method, r.URL.Path)
	}
	window := func(name string, rate int, key func(*http.Request) string) throttle.Rule {
		return throttle.Rule{
			Name:      name,
			Limit:     throttle.Limit{Rate: rate, Period: time.Second},
			Algorithm: throttle.SlidingLog,
			Key:       key,
		}
	}
	rules := []throttle.Rule{
		window(StripeGlobal, global, account),
		window(StripeEndpoint, 25, endpoint),
	}
	if c.Concurrency > 0 {
		rules = append(rules, throttle.Rule{Name: StripeGlobalConcurrency, Concurrency: c.Concurrency, Key: account})
	}
	if c.EndpointConcurrency > 0 {
		rules = append(rules, throttle.Rule{Name: StripeEndpointConcurrency, Concurrency: c.EndpointConcurrency, Key: endpoint})
	}
	return Profile{Name: "stripe", Rules: rules, Answer: stripeAnswer()}
}

func stripeAnswer() func(*http.Request, Decision) Answer {
	var ids idSource
	return func(_ *http.Request, d Decision) Answer {
		id := http.Header{"Request-Id": {ids.next("req_")}}
		if d.Admitted {
			a := jsonAnswer(http.StatusOK, struct{}{})
			return a.merge(id)
		}
		a := jsonAnswer(http.StatusTooManyRequests, map[string]any{"error": map[string]string{
			"type":    "invalid_request_error",
			"code":    "rate_limit",
			"message": "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
		}}).merge(id)
		if d.Paused {
			a.Header.Set("Retry-After", retryAfterSeconds(d.Wait))
		} else if reason, ok := stripeReasons[d.Rule]; ok {
			a.Header.Set("Stripe-Rate-Limited-Reason", reason)
		}
		return a
	}
}
