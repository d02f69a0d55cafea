// Package redisstore is the Redis store: buckets shared by every Transport
// that uses the same Redis and namespace, each request booked by one atomic
// Lua call timed by Redis's clock. It holds the scripts (the .lua files
// beside it, embedded), the batcher that sends the calls of concurrent
// requests in one pipeline and one script call (batch.go), and the
// heartbeat by which the replicas of a fleet count each other
// (heartbeat.go).
//
// Store implements store.Store. It imports internal/store and go-redis,
// nothing else of the module: the outage store around it takes it through
// the store.Store interface, and the root wires the two (distributed.go).
package redisstore
