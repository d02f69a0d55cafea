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
	{"_retry-after_outside_", "a Retry-After-only server is learnt from rejections alone; since a rejection the ledger cannot place is read by the request's queue (2026-12-04) the cell passes at 0.95-0.97 of what remains in most runs, but 2 of 17 runs that day fell to 0.80-0.83 on both attempts (one of them in .ci/run), and one passed at 0.907, with no stall measured: the cause is not found, so it is not reliable yet"},
	{"_pause_b1_20rps", "at the gate's edge: 0.980 against the rules' 0.990 in 5 of 5 runs since the reading's slack (2026-12-03), which passes on vs off (≥ off − 0.01) by rounding, so a request less fails it; before the slack 0.81-0.87, a replica lagging 4 units of a 20/s window after the pause read as others' spending. The last point is not explained yet"},
	{"_stripe_pause_", "a rejection that names no time: the fleet probes the pause (7-8/s, within the gate) and each probe's rejection pauses it 50-250 ms more past the pause's end (0.94-0.97 against 0.98); one run of 2026-12-05 ran at 81-96/s for the three seconds after the pause, a bare 429 read over a count begun within its window (the outage matrix's use-after has the same cause, see internal/faulttest's whyAfter)"},
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
