// Package localstore is the store of a Transport without WithRedis: the
// leaky buckets of this process, run by the generic cell rate algorithm
// (GCRA). A bucket is one number, its theoretical arrival time (TAT), kept
// in a map under one mutex; idle buckets are swept, since a TAT in the past
// is a new bucket. It books a request in all its buckets or none, defers a
// bucket whose slot comes too far before the departure, holds buckets shut
// for a pause, caps them and counts what replicas report sent (Limit), and
// hands every reservation an undo of its own (localBooking). A token
// bucket runs the same GCRA maths, its pause emptying it; the window
// buckets (fixed window, sliding log, sliding counter) keep their counts
// or log in a map of their own (window.go) and run internal/algorithm's
// maths in microseconds, as Redis does.
//
// The maths (gcra.go) is unexported: its one user in Go is this store.
// internal/redisstore's reserve.lua runs the same steps in Redis, and the
// root's parity tests hold the two stores to the same decisions. The root
// (leaky.go) turns a rule's Limit into a bucket's parameters; the outage
// store's tests use this store as their healthy shared store.
//
// It imports internal/store and internal/algorithm only.
package localstore
