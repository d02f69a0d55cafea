package feedbacktest

import "strings"

// knownFailures are the matrix cells the product does not pass yet, each
// with what it lacks (issue 9 stays open for them, and docs/FEEDBACK.md's
// "Known limits" says more). Their gates are still measured, printed and
// written to the table, marked "known"; a failure of theirs is logged
// instead of failing the test, so that the rest of the matrix gates the
// product in CI. A listed cell that passes is logged as such: take it off
// the list. Never list a cell to make a run green: list what the product
// cannot do, with the reason.
var knownFailures = []struct{ match, why string }{
	{"_outside_", "the first window overshoots: the waiters booked before the first answer keep slots booked at the rule's rate, the server's 429 pauses the fleet for its whole-second Retry-After, and the gate counts that pause; a cap on booked departures per window (not a rate) is the fix"},
	{"_pause_", "replicas whose waiters booked before a pause learn of it only at their next booking (no notification yet), so each sends about one request into it"},
	{"busy+7idle_sliding-1s_xrl-unix-ceil_steady_", "the first second sends about 182 requests where the rules alone send 195 (0.965 of the quota against 0.980); after it the fleet holds 196/s. The cause is not found yet"},
	{"busy+7idle_sliding-1s_ietf_steady_", "as the xrl-unix-ceil cell of the same fleet: the first second, cause not found yet"},
}

// knownFailure returns why cell name is a known failure, or "".
func knownFailure(name string) string {
	for _, k := range knownFailures {
		if strings.Contains(name, k.match) {
			return k.why
		}
	}
	return ""
}
