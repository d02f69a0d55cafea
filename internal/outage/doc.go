// Package outage is the outage store: it wraps the shared store (the Redis
// store, taken through the store.Store interface), bounds every call with a
// short timeout, and when a call fails or times out opens its breaker and
// serves requests in the outage mode (local token buckets at this replica's
// share of each rule, fail open, or fail closed) until a half-open probe
// finds the shared store answering again. Returning, it books what was spent
// locally, and for a grace period keeps each replica to its share, so the
// return is no double burst. docs/OUTAGES.md has the design.
//
// It imports internal/store and golang.org/x/time/rate, nothing else of the
// module; the root wires it over internal/redisstore (distributed.go) and
// turns its Mode and Change into the user's.
package outage
