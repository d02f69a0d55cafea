// Package feedbacktest holds the multi-process tests of issue 4, "listen to
// the server": real worker processes (internal/fleettest) sharing buckets
// through a private Redis, against local servers that answer 429s and send
// rate-limit headers, show that one 429 pauses the whole fleet, that a fleet
// sharing a quota with an unseen consumer adapts to what remains, and that
// retries take fresh slots and never push the fleet over the quota.
//
// The package has no API: everything is in its tests. The strict
// sliding-window server of the shared-quota tests is fleettest's, speaking
// one of three header dialects (IETF RateLimit, X-RateLimit-*, Retry-After
// alone).
package feedbacktest
