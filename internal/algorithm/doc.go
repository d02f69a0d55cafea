// Package algorithm holds the pure maths of the rate-limit algorithms a
// rule may choose besides the leaky bucket (whose GCRA maths stays in
// internal/localstore's gcra.go, the hot path): the token bucket's pause
// (token.go), the fixed window (fixed.go), the sliding log (log.go) and the
// sliding counter (counter.go), over the windows of window.go.
//
// Every function takes the time as an argument and keeps no clock: times
// and periods are int64 in one unit, which both stores choose to be the
// microsecond so that the local store (internal/localstore) and Redis
// (internal/redisstore's window.lua, which runs the same steps) decide
// exactly alike. All of them share the leaky bucket's "wait for the slot"
// semantics: At returns the earliest instant a request of some cost may
// depart, no earlier than a floor the caller gives (now, a pause's end, the
// request's other buckets), and booking it counts the request where it
// will depart, so that waiters queue without polling.
//
// Products of a quota and a period must stay below 2^53 (Lua's doubles are
// exact below it): the root rejects rules beyond it for the Redis store.
//
// It imports nothing of the module.
package algorithm
