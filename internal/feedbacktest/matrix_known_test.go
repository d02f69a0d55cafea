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
	{"8x16_sliding-1s_xrl-unix-ceil_outside_", "the first window overshoots: 128 waiters book 0.65 s of slots at the rule's rate before the first answer, a success's cut stretches only what books after them, so the fleet's first second holds about 155 beside the consumer's 48; a rejection's cut then re-times the queue and its whole second pauses for the probe backoff only, but later rejections come one or two a second and each rejection's stretch lasts a queue's length (0.61-0.64 of what remains, 2026-12-03). Since a lead is stretched once to a pace and a debt is due by the first window's end (2026-12-04), 0.79-0.82: the waiters booked at the rule's pace before the first cap still leave densely after the first rejection's pause (a rejection's re-timing assumes them at the cap's spacing), and a success's cut still moves only the store's lead. Re-timing on every cut reached 0.73-0.94 but cost the steady cells (docs/FEEDBACK.md). The 1x32 and 4x8 cells, whose queues are 32 deep, pass at 0.95-0.96"},
	{"8x16_sliding-1s_ietf_outside_", "as the xrl-unix-ceil outside cell of the same fleet: its 128 booked waiters overshoot the first window"},
	{"_retry-after_outside_", "a Retry-After-only server is learnt from rejections alone; since a rejection the ledger cannot place is read by the request's queue (2026-12-04) the cell passes at 0.95-0.97 of what remains in most runs, but 2 of 17 runs that day fell to 0.80-0.83 on both attempts (one of them in .ci/run), and one passed at 0.907, with no stall measured: the cause is not found, so it is not reliable yet"},
	{"_pause_b1_20rps", "at the gate's edge: 0.980 against the rules' 0.990 in 5 of 5 runs since the reading's slack (2026-12-03), which passes on vs off (≥ off − 0.01) by rounding, so a request less fails it; before the slack 0.81-0.87, a replica lagging 4 units of a 20/s window after the pause read as others' spending. The last point is not explained yet"},
	{"_stripe_pause_", "a rejection that names no time: the fleet probes the pause (7-8/s, within the gate) and each probe's rejection pauses it 50-250 ms more past the pause's end (0.94-0.97 against 0.98)"},
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
