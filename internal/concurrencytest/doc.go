// Package concurrencytest holds the fleet tests of the concurrency caps
// (throttle.Rule.Concurrency): real worker processes sharing their leases
// through a private Redis, against a local server that rejects a request
// while its cap of others are in service. It has no code outside its
// tests.
package concurrencytest
