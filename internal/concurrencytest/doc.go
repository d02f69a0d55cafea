// Package concurrencytest holds the fleet tests of issue 12: concurrency
// caps (throttle.Rule.Concurrency), costs corrected from the server's
// answers (throttle.Rule.ActualCost) and priorities, with real worker
// processes sharing their leases and buckets through a private Redis,
// against local servers that enforce a cap on requests in service or a
// quota of points. It has no code outside its tests.
package concurrencytest
