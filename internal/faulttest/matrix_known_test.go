package faulttest_test

import "strings"

// knownFailure is a gate of the outage matrix the product does not pass
// yet (issue 11 stays open for it): match selects cells by a part of
// their name, gate names the gate, measured gives the figures of the runs
// that listed it, why what the product lacks (docs/OUTAGES.md's matrix
// section says more). Its gate is still measured, printed and written to
// the table, marked "known"; its failure is logged instead of failing the
// test, so that every other gate of the matrix holds in CI. A listed gate
// that passes is logged as such: take it off the list. Never list a gate
// to make a run green: list what the product cannot do, with the reason.
type knownFailure struct {
	match, gate, measured, why string
}

// Why the product fails, in the words of issue 11 and of the reading of
// internal/outage (outage.go, local.go, breaker.go) that docs/OUTAGES.md's
// matrix section gives.
const (
	whySwitch    = "at the switch, the slots the replicas booked in Redis for their waiting requests still depart; a local bucket now starts empty at the replica's last shared departure (outage.Store.sharedUntil), but one value serves every key and a stalled Redis's timed-out calls leave bookings the replica never learnt of; at 20/s every replica's local burst is at least 1 (4 or 8 against the rule's 1)"
	whyReturn    = "at the return, the replicas back first spend the shared rate while the others still spend their local share, and when the 2 s grace period ends the requests held to their local slots leave together; the rejections of that window are retried (default policy) into the next"
	whyWindow    = "at 20/s with 4 or 8 replicas the outage's local buckets (5 or 2.5/s each, burst floored at 1, not 0) burst 4 or 8 against the rule's 1; each bare 429 pauses a replica's local buckets 50–250 ms, which then let one request go at once, and the rejected requests' retries land in the same second"
	whyLowUse    = "the switch's overshoot is rejected, and each bare 429 pauses the replica's local buckets (50–250 ms, refilling from empty): at 20/s each pause costs a replica a whole slot or more"
	whyShare     = "the outage's share is 1 / the live replicas: the busy replica gets 1/8 of the rule while the seven idle ones leave theirs unused (share by count, not by use); a share by load, each beat carrying the replica's requests a second, was built and measured on 2026-12-05 (busy+7idle 0.97-0.98 through the outage at 200/s and 1000/s) and taken out: each replica takes its share from its own last beat, and the shares of noisy loads (an 8x16 replica makes 16 or 32 requests in a second, its goroutines booking in turns) summed to 0.90-0.94 (use 0.90-0.94 in 4x8 and 8x16) or, smoothed over 10 s from a start, above 1 (1 s windows of 213-228 against limits of 211-212): it needs loads whose shares are known to sum to at most 1"
	whyAfterKill = "after a kill at 200/s the fleet sometimes falls to 0.5-0.6 of the rule from the slowest replica's grace end on, with 1.5-1.7 s waits, no 429 and nothing failed; not the grace end's debt (capped at the rule's burst, 1 here), its cause not traced yet"
	whyAfter     = "after the return at 20/s the return's overshoot is rejected, and each bare 429 pauses the replicas' buckets 50–250 ms, a slot or more at 20/s; 8x16 at 200/s after a stall stays below 0.95, its cause not measured yet (after a kill it passes). Until 2026-12-06 a bare 429 of the return's windows was also read over a count begun within its window: after a restart the store counts only from its first rejection, so 32 units over 240 ms capped 8 × 16 at 28/s, climbing back by 0.2 %/s (0.53–0.62 at 200/s); the feedback model now takes the window's part before the count at the rule's pace (internal/feedback quotaView.uncounted)"
)

// knownFailures are the matrix's known failures, in one place.
var knownFailures = []knownFailure{
	{"1x32_20rps_", gateSwitch, "21–23 in a window (limit 22): one replica's local burst on top of its booked slots", whySwitch},
	{"4x8_20rps_", gateSwitch, "35–38 in a window (limit 22); 25–28 since the local buckets start empty after the shared queue", whySwitch},
	{"8x16_20rps_", gateSwitch, "28–34 (limit 22); 20 in both faults since the local buckets start empty after the shared queue", whySwitch},
	{"8x16_200rps_", gateSwitch, "227–238 (limit 211); the issue saw 263; since the local buckets start empty after the shared queue 207 (kill), 215 (stall)", whySwitch},
	{"busy+7idle_20rps_", gateSwitch, "28–31 (limit 22)", whySwitch},
	// Passed in the four runs that measured them, but at the limit, from
	// the same overshoot: listed so that the defect, not the run's luck,
	// decides; they are logged as passing until the switch is fixed.
	{"4x8_200rps_", gateSwitch, "205–211 (limit 212): passed, at the limit", whySwitch},
	{"8x16_1000rps_", gateSwitch, "1013–1053 (limit 1060): passed, at the limit", whySwitch},

	{"4x8_20rps_", gateReturn, "25–29 (limit 22)", whyReturn},
	{"8x16_20rps_", gateReturn, "29–35 (limit 22)", whyReturn},
	{"8x16_200rps_", gateReturn, "208–213 (limit 211), at the limit in half the runs; 227 in a run that stalled 2.3 s", whyReturn},
	{"busy+7idle_20rps_", gateReturn, "23 (limit 22)", whyReturn},

	{"8x16_20rps_", gateWindow, "37–39 in the outage's steady state (limit 22)", whyWindow},
	{"4x8_20rps_", gateWindow, "≤ 22 in four runs, 23 in a fifth (8.98 s from the start, in the outage; no stall)", whyWindow},
	{"busy+7idle_20rps_", gateWindow, "not seen over 22 yet; the same eight local limiters as 8x16 at 20/s", whyWindow},

	{"4x8_20rps_", gateUseOutage, "0.919–0.950", whyLowUse},
	{"8x16_20rps_", gateUseOutage, "0.925–0.962, below 0.95 in most runs", whyLowUse},
	{"busy+7idle_", gateUseOutage, "0.57–0.60 at 20/s, 0.165–0.167 at 200/s, 0.130–0.131 at 1000/s", whyShare},
	{"1x32_1000rps_", gateUseOutage, "0.951–0.98 (limit 0.95): passed, at the limit in a run with 439 ms of machine stalls", whyLowUse},

	{"4x8_20rps_", gateUseAfter, "0.90–0.93 (2026-12-06); at 200/s and 1000/s 0.971–0.983 since the bare-rejection fix", whyAfter},
	{"8x16_20rps_", gateUseAfter, "0.93–0.96 (2026-12-06; 0.960 passed once)", whyAfter},
	{"8x16_200rps_b1_stall", gateUseAfter, "0.933–0.938 in two runs of 2026-12-06 (kill: 0.958–0.966; before the bare-rejection fix 0.565)", whyAfter},
	// Listed on 2026-12-07 after two .ci/runs of six failed it; alone,
	// under the race detector, it passes at the limit.
	{"8x16_200rps_b1_kill", gateUseAfter, "0.674 and 0.844 in two of the six .ci/runs of 2026-12-07 (the others passed it); 0.950-0.970 in four runs alone (go test -race -count=4 -run 'TestOutageMatrix/8x16_200rps_b1_kill$'); the fall starts at the slowest replica's grace end (return + 1.03 s + 2 s: 197, 181, 124, 95 a second), with waits of 1.5-1.7 s and no 429", whyAfterKill},
	// The grace period after the return keeps the outage's share too.
	{"busy+7idle_", gateUseAfter, "0.45–0.90 (0.46–0.64 at 200/s and 1000/s)", whyShare},
}

// knownFailureOf returns the entry listing gate of cell name, or nil.
func knownFailureOf(name, gate string) *knownFailure {
	for i, k := range knownFailures {
		if k.gate == gate && strings.Contains(name, k.match) {
			return &knownFailures[i]
		}
	}
	return nil
}
