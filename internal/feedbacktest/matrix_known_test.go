package feedbacktest

import "strings"

// whyBusyIdleFirstCount is why the busy+7idle cells that read quota
// headers in a sliding window fail now and then.
const whyBusyIdleFirstCount = "a busy replica beside seven nearly idle ones counts its peers by the heartbeat's first count in its first window, which held 1 peer of 7 through its first second in a run logged on 2026-12-07 (the peers that had beaten before its first request): the first window's allowance of one unreported request a peer misses six, reads their units as others' spending scaled to a window, and caps the busy replica at 185-193 in its first second where the rules alone sent 196 (0.954-0.969 against the rules' 0.980 in CIs of 2026-12-06 and -07; this cell or its siblings fail now and then, pass more often). Two fixes were measured and reverted, each worse elsewhere: beating every 100 ms until the count settles (all busy+7idle cells passed; faulttest's 8x16_1000rps_b10_kill fell to 0.929-0.968 after the return, mean 0.948 against 0.972), and assuming DefaultFleetSize until the count settles (all busy+7idle cells passed; TestFleetRecoversFromLate429/X-RateLimit, 4 replicas beside an outside consumer, met 3 rejections in its first second where it met 0-1, and failed one .ci/run with a fourth after its settle time). What it lacks: a count of the peers that is fresh at the first reading without changing the outage store's count (see docs/FEEDBACK.md, Known limits)"

// knownFailures are the matrix cells the product does not pass yet, each
// with what it lacks (issue 9 stays open for them, and docs/FEEDBACK.md's
// "Known limits" says more). Their gates are still measured, printed and
// written to the table, marked "known"; a failure of theirs is logged
// instead of failing the test, so that the rest of the matrix gates the
// product in CI. A listed cell that passes is logged as such: take it off
// the list. Never list a cell to make a run green: list what the product
// cannot do, with the reason.
var knownFailures = []struct{ match, why string }{
	{"_retry-after_outside_", "a Retry-After-only server is learnt from rejections alone. Since 2026-12-06 a rejection of a request that left after a backoff began is no longer read as a refusal (its whole-second Retry-After had paused the fleet a second: 0.68-0.72 of what remains); after it 10 of 11 runs passed at 0.930-0.960 (one in the whole matrix), and one failed both attempts at 0.72-0.74 with a second of 30 and of 53 sent, its first attempt in a 1 s machine stall, its second in 265 ms of stalls: a whole-second wait was still honoured whole, the reading that chose it not logged. Not reliable yet"},
	{"_pause_b1_20rps", "at the gate's edge: 0.980 against the rules' 0.990 in 5 of 5 runs since the reading's slack (2026-12-03), which passes on vs off (≥ off − 0.01) by rounding, so a request less fails it; before the slack 0.81-0.87, a replica lagging 4 units of a 20/s window after the pause read as others' spending. The last point is not explained yet"},
	{"busy+7idle_sliding-1s_xrl-unix-ceil_steady_", whyBusyIdleFirstCount},
	{"busy+7idle_sliding-1s_xrl-unix-ceil_pause_", whyBusyIdleFirstCount},
	{"busy+7idle_sliding-1s_ietf_steady_", whyBusyIdleFirstCount},
	{"busy+7idle_sliding-1s_ietf_pause_", whyBusyIdleFirstCount},
	{"_stripe_pause_", "a rejection that names no time: the fleet probes the refusal (7-8 probes/s, within the gate) and learns of its end at the next probe, up to the backoff's 250 ms later, a loss uniform in 0-49 requests, where the gate on vs off allows 10 over the cell's 5 s (a loss of 50 ms of sending) and the use gate 30: 0.934-0.977 against the rules' 0.972-0.980 in 10 runs of 2026-12-06, 4 of them passing. Meeting on vs off in a 5 s cell takes a probe every 50 ms, 20/s or more, not the handful of probes the pause gate allows; since 2026-12-06 no probe cuts the fleet (before: 0.50-0.77 in 3 of 5 runs, the probes' rejections read as full windows)"},
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
