package throttletest

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
)

// Profile is a simulated provider: the rules its server enforces and how
// it answers, in the provider's own shape. [Stripe], [Twilio], [GitHub],
// [Shopify] and [OpenAI] return ready ones; a Profile of your own needs
// only Rules and Answer.
//
// A Profile is plain data: edit its Rules (any [throttle.Algorithm], a
// Concurrency, Key and Cost functions, Match) before giving it to
// [NewServer] or [NewHandler], which copy it. The server reads its rules
// as package middleware does (a Match.Host is compared with the request's
// Host header); the profiles' rules match no host, a server being the
// provider. The zero
// Profile has no rules and answers every request 200 with no body.
type Profile struct {
	// Name is the provider, lowercase ("stripe").
	Name string

	// Rules are the limits the server enforces, strictly: a request is
	// admitted only when it fits every rule it meets at the instant it
	// arrives, and then counted in all of them; nothing queues. A rule
	// with a Concurrency holds a slot from admission until the answer is
	// written (after the service time, see [WithServiceTime]).
	Rules []throttle.Rule

	// Answer returns the answer to a request the server decided d on:
	// the status, headers and body of a refusal, or, for an admitted
	// request, the headers to add (the rate-limit headers most providers
	// send on every answer) and, when the server has no handler of its
	// own, the status and body. Nil answers 200 to admitted requests and
	// 429 to refused ones, with no headers or body. It is called from
	// concurrent requests, outside the server's lock, and must not keep d.
	Answer func(r *http.Request, d Decision) Answer
}

// Answer is a response the profile gives: Status (0 means 200), Header
// (added to the response; may be nil) and Body (may be nil).
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decision is what the server decided on one request, handed to
// [Profile.Answer]. It is a value the server does not keep.
type Decision struct {
	// Now is the server's time when it decided, by its clock.
	Now time.Time

	// Admitted reports whether the request fits every rule it meets.
	Admitted bool

	// Paused reports a refusal by [Server.Pause]: every request is
	// refused until the pause ends.
	Paused bool

	// Rule is the name of the rule that refused the request ("" when it
	// was admitted or paused): the first of the profile's rules, in order,
	// that did not admit it.
	Rule string

	// Concurrency reports that Rule refused on its concurrency cap rather
	// than on its rate.
	Concurrency bool

	// Wait is how long until the refusing rule would admit the request,
	// or until the pause ends; 0 for a concurrency cap (a slot frees when
	// a request ends) and for a cost the rule can never admit.
	Wait time.Duration

	// Quotas are the states of the rules the request meets, after the
	// decision, in the profile's order; during a pause only their names,
	// limits and caps (the Limiter is not asked).
	Quotas []Quota
}

// Quota returns the state of the rule named rule, or false when the
// request does not meet it.
func (d Decision) Quota(rule string) (Quota, bool) {
	for _, q := range d.Quotas {
		if q.Rule == rule {
			return q, true
		}
	}
	return Quota{}, false
}

// Quota is the state of one rule's bucket (the request's partition of it)
// as a provider would report it.
type Quota struct {
	// Rule is the rule's name.
	Rule string

	// Limit is the rule's Limit; the zero Limit for a concurrency-only
	// rule.
	Limit throttle.Limit

	// Size is what the bucket holds when empty of requests: Limit.Burst
	// for a leaky or token bucket (Shopify's 40), Limit.Rate for a window.
	Size int64

	// Remaining is the most units of cost the bucket could take now, as
	// the middleware reports it; Used is Size - Remaining (for a leaky or
	// token bucket, its fill rounded up; for a fixed window, the count of
	// the current window).
	Used      int64
	Remaining int64

	// Reset is how long until the quota is whole again: the end of the
	// fixed window, or the time until the bucket or the log has drained.
	Reset time.Duration

	// Concurrency is the rule's cap on requests in flight (0: none) and
	// InFlight the requests of this partition in flight now, the
	// request's own included when it was admitted.
	Concurrency int
	InFlight    int
}
