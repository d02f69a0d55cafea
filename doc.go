// Package throttle keeps a fleet of workers under the rate limits of the
// third-party APIs they call.
//
// A Transport is an [http.RoundTripper] that makes each request wait for its
// slot before it is sent:
//
//	client := &http.Client{Transport: throttle.NewTransport(nil,
//		throttle.WithRules(throttle.Rule{
//			Name:  "stripe-global",
//			Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10},
//		}),
//	)}
//
// Every [Rule] that matches a request holds a bucket (per partition key, if
// the rule has one). Buckets are leaky buckets run as queues with the generic
// cell rate algorithm (GCRA): a request over the limit is given the next free
// slot and waits for it instead of failing, and waiters of one bucket depart
// in the order they booked. A request matched by several rules books a slot
// in all of their buckets or in none.
//
// Buckets live in this process by default. With [WithRedis] every replica of
// a fleet books its slots in the same buckets through one atomic Lua call per
// request (concurrent requests of one replica share one call), timed by
// Redis's clock, so the fleet as a whole keeps the limit.
//
// A wait never outlives the request: when the slot lies beyond the context's
// deadline or the transport's maximum wait, RoundTrip fails at once with a
// [*WaitError] and books nothing.
//
// Every response is read for what the server says about its limits
// (Retry-After, X-RateLimit-*, the IETF RateLimit fields and provider
// dialects, see [header.Parse]): a server that names a time to come back
// pauses the request's buckets for the whole fleet, a rejection or a quota
// nearly spent slows them down, and rate-limited responses are retried in
// a fresh slot when the request can be replayed safely (see [RetryPolicy]).
//
// When Redis cannot be reached within [WithRedisTimeout], the Transport
// keeps going on local limiters sized to this replica's share of the
// fleet (or fails open or closed, see [WithOutageMode]) and returns to the
// shared buckets once Redis answers again; [Transport.Mode] tells which.
//
// Every decision (a slot acquired or refused, a rate-limited answer, a
// fleet-wide pause, a retry, a lease, a mode change) is an [Event] for the
// observers of [WithObserver] and [WithLogger]; packages otelthrottle and
// promthrottle record them as OpenTelemetry or Prometheus metrics
// (docs/OBSERVABILITY.md). Without an observer they cost nothing.
package throttle
