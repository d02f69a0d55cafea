// Package middleware limits the requests an HTTP server takes, on the same
// [throttle.Rule] values, algorithms and stores as the client side: a
// [Limiter] wraps an [http.Handler] (its Handler method is a
// func(http.Handler) http.Handler) and answers a request over its limits
// with 429 Too Many Requests, before the handler runs.
//
// # Shape of the API
//
//	l, err := middleware.New(
//		middleware.WithRules(throttle.Rule{Name: "free", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 100},
//			Key: middleware.APIKey("Authorization")}),
//		middleware.WithTier("pro", throttle.Rule{Name: "pro", Limit: throttle.Limit{Rate: 10_000, Period: time.Minute, Burst: 10_000},
//			Key: middleware.APIKey("Authorization")}),
//		middleware.WithTierFunc(func(r *http.Request) string { return plans[r.Header.Get("Authorization")] }),
//	)
//	if err != nil { ... } // a *throttle.RuleError or *throttle.OptionError
//	defer l.Close()
//	http.ListenAndServe(addr, l.Handler(mux))
//
// The parts, each with its options:
//
//   - Rules: each request is checked against every rule of its tier whose
//     Match fits it ([WithRules] is the default tier, [WithTier] adds one,
//     [WithTierFunc] picks it), all of them booked in one store call, all or
//     nothing. A rule's Key partitions it per client ([APIKey], [KeyHeader],
//     [ClientIP]); keys are hashed before they reach any store. Rule.Cost
//     weighs a request. Rule.Concurrency caps the requests of a partition in
//     the handler at once: in this process, or with [WithRedis] across the
//     fleet (the Transport's leases, and this replica's share of the cap
//     while Redis is unreachable).
//   - Answers: every response carries the standard headers
//     ([SetStandardHeaders]: X-RateLimit-Limit, -Remaining, -Reset and the
//     draft-ietf-httpapi-ratelimit-headers-10 fields RateLimit-Policy and
//     RateLimit); a refusal adds Retry-After and a JSON body
//     ([WriteRefusal]). [WithHeaders] replaces the headers and
//     [WithRefusal] the refusal, for a provider's own shape.
//   - The decision of each request is in its context: [DecisionFrom] gives
//     the wrapped handler and the hooks the rule that decided, its limit,
//     remaining, reset, the wait, the reason of a refusal and each rule's
//     state ([Decision]).
//   - Outside consumers: [Limiter.Take] books units in a key's buckets
//     without an HTTP request (another door to the same quota);
//     [Limiter.Decide] decides a request without writing anything, for a
//     server that answers in its own shape.
//   - Queueing: with [WithMaxWait] a request over the rate waits for its
//     slot up to that long (and never past its context's deadline) instead
//     of being refused; a wait beyond it is refused at once, booking
//     nothing.
//   - Time: [WithClock] injects the clock (a fake one in tests).
//   - Stores: in this process by default; [WithRedis] shares the buckets
//     across replicas, with the Transport's outage handling
//     ([WithOutageMode]): ModeFallback (the default: each replica limits
//     alone at its share of each rule), ModeFailOpen (requests pass
//     unlimited), ModeFailClosed (requests are answered 503 with
//     Retry-After). A Redis outage never answers 5xx unless fail-closed
//     was chosen. [WithHashTagPerKey] spreads partitioned buckets over a
//     Redis Cluster; [WithoutRedisRoom] saves the second Redis call of an
//     admitted request (see Headers).
//
// # Headers
//
// For the rule that decided (the one that refused, else the one with the
// least room left), X-RateLimit-Limit is its quota, X-RateLimit-Remaining
// the units left, X-RateLimit-Reset the seconds until the whole quota is
// back. RateLimit-Policy lists every rated rule of the request as
// "name";q=quota;w=window-seconds and RateLimit as
// "name";r=remaining;t=reset-seconds, the rule that decided first. Seconds
// are rounded up.
//
// With [WithRedis], an admitted request's room is read from Redis by a
// second, read-only script call after its reservation (the reserve script
// replies with no room): two round trips a request, and the room told may
// already include other replicas' requests booked between the two. In an
// outage mode there is no room to read: the decision then has
// [Decision.QuotaKnown] false and the standard headers leave out
// X-RateLimit-Remaining, -Reset and the RateLimit field on an admitted
// request. A refusal always tells 0 and its wait.
//
// # Concurrency safety
//
// A Limiter is safe for concurrent use. Its hooks and the rules' functions
// (Key, Cost, Match.Func) are called from the goroutines of concurrent
// requests, never under a lock of the Limiter's.
package middleware
