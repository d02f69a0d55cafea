// Package feedbacktest holds the multi-process tests of issue 4, "listen to
// the server": real worker processes (internal/fleettest) sharing buckets
// through a private Redis, against local servers that answer 429s and send
// rate-limit headers, show that one 429 pauses the whole fleet, that a fleet
// sharing a quota with an unseen consumer adapts to what remains, and that
// retries take fresh slots and never push the fleet over the quota; and
// the scenario matrix of issue 9 (TestMatrix): every header shape against
// every window kind, every fleet shape in every scenario, each cell gated
// and beside its do-nothing baseline, printed as one table.
//
// The package has no API: everything is in its tests. The strict servers
// are fleettest's: a sliding log or fixed windows, speaking one of its
// header shapes (fleettest.Shapes).
package feedbacktest
