package feedbacktest

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestMatrix is issue 9's scenario matrix: fleets of real worker processes
// against strict local servers, one cell per combination of
//
//   - fleet: 1x32-local (one process of 32 goroutines, local store), 4x8
//     and 8x16 (processes × goroutines sharing a bucket in a private
//     Redis), busy+7idle (one process of 16 goroutines beside seven
//     sending one request a second each);
//   - window: a sliding log of 1 s or 10 s, a fixed window of 1 s or 60 s
//     (fleettest.Quota; strict: a request over the limit is rejected and
//     not counted);
//   - headers: one of fleettest.Shapes, a provider's wording of successes
//     and rejections (none, retry-after, five X-RateLimit encodings, IETF,
//     GitHub, OpenAI, Shopify, Stripe), read by workers with the
//     provider's dialect;
//   - scenario: steady (the fleet alone), outside (an outside consumer
//     takes 30 % of the quota the whole run), pause (the provider refuses
//     everything for 3 s mid-run, in the shape's own form);
//   - burst: 1, or 1 % of the quota's limit (at least 1).
//
// The rule equals the quota: limit L per window W gives the rule {Rate: L,
// Period: W, Burst: b} with the default headroom, MaxAttempts 1 (every
// rejection counts as it is). The quota is 200 requests a second (2000 per
// 10 s, 12000 per 60 s), and 20 a second in the low-rate cells.
//
// The default cells: every shape meets every window with the 8x16 fleet,
// steady; every fleet meets every scenario with X-RateLimit (Unix
// seconds, rounded up) and IETF headers on the 1 s sliding log, bursts
// alternating so that each fleet meets both; Retry-After alone and
// Stripe under the outside consumer and the pause with 8x16; and 4x8 at
// 20/s, steady and paused. Each cell runs 5 s (pause cells 2 s, the 3 s
// pause, 3 s), beside its do-nothing baseline (see below): about 15
// minutes on a two-core machine, so give go test a -timeout above the
// default 10 minutes:
//
//	go test -race -count=1 -p 1 -timeout 30m -run TestMatrix -v ./internal/feedbacktest/
//	go test -race -count=1 -run 'TestMatrix/8x16_sliding-1s_ietf_pause_b2' -v ./internal/feedbacktest/
//	go test -race -count=1 -run 'TestMatrix/busy\+7idle_' -v ./internal/feedbacktest/
//
// Environment:
//
//   - THROTTLE_MATRIX_SCALE=3 lengthens every cell three times (the pause
//     itself stays 3 s); any number ≥ 1. The 10 s and 60 s windows turn
//     over only in cells that long.
//   - THROTTLE_MATRIX=full runs the full cross product (every fleet,
//     window, shape, scenario and burst: 1152 cells, about 4 hours; give
//     -timeout 6h).
//   - THROTTLE_MATRIX_TABLE=path writes the table, in markdown, to path.
//
// A Redis test never skips, -short or not. A cell that would run into the last 3 minutes
// before the test binary's deadline (kept for the package's other tests)
// is not started: it fails, naming the -timeout to give, and the table
// still prints.
//
// # Gates
//
// Each cell fails with a message naming the gate and its figures:
//
//   - steady: the fleet's accepted requests ≥ 0.97 of the quota over the
//     run (L/W × its duration), no rejection, no failed call (a call
//     without a response, other than those the run's end cuts off).
//   - outside: after the first window (or half the cell, when the window
//     is longer), ≤ 1 % of the fleet's requests rejected and its accepted
//     requests ≥ 0.90 of what remains (the quota over that span less the
//     outside consumer's accepted requests); for shapes whose successes
//     carry nothing (none, retry-after, stripe), ≤ 5 % and ≥ 0.85. The
//     outside consumer must have sent ≥ 80 % of its rate, or the cell did
//     not run as meant.
//   - pause: no fleet request arrives in the pause after the grace that
//     follows the first rejection (the requests already under way when
//     the fleet was told: twice the fleet's p99 round trip plus 20 ms,
//     plus the stalls measured in it; see graceFixed), up to 25 ms before
//     its end (endSlack); for shapes whose rejection names no time (none,
//     stripe) a client can only probe, and at most 10 probes a second
//     may arrive instead (maxProbeRate); and the accepted requests ≥ 0.95
//     of the quota outside the pause.
//   - on vs off: every cell's fleet also runs WithoutFeedback (the rules
//     alone), and feedback must use at least as much: on ≥ off − 0.01.
//     Outside cells print the baseline but do not gate on it: a fleet
//     that ignores the rejections takes the outside consumer's share by
//     force (its window is always full), so its use of what remains is
//     1.0 by construction, not a level feedback could be held to.
//
// A transport WithoutFeedback reads no header and MaxAttempts 1 retries
// nothing, so the baseline does not depend on the shape: one off run, on
// a server of shape none, serves every shape of a fleet, window,
// scenario, burst and rate, and runs just before the first cell that
// needs it.
//
// The table at the end (one row per cell, markdown, for docs/FEEDBACK.md)
// has each cell's figures, its baseline and PASS or FAIL with the gates
// that failed. Failures against the product are expected while its
// feedback controller is reworked; the harness's own figures (the
// baselines: ~0.98 of the quota, no rejection on steady) show when a
// failure is the machine's.
func TestMatrix(t *testing.T) {
	m := newMatrix(t)
	cells := defaultCells()
	if m.full {
		cells = fullCells()
	}
	var est time.Duration
	ran := map[string]bool{}
	for _, c := range cells {
		est += m.estimate(c, ran)
	}
	t.Logf("%d cells, about %v with their baselines (scale %v; -run selects fewer)", len(cells), est.Round(time.Minute), m.scale)
	for _, c := range cells {
		t.Run(c.name(), func(t *testing.T) { m.runCell(t, c) })
	}
	m.report(t)
}

// Gates' figures: see TestMatrix.
const (
	steadyMinUse       = 0.97
	outsideMaxRejected = 0.01
	outsideMinUse      = 0.90
	looseMaxRejected   = 0.05 // outside, for shapes whose successes say nothing
	looseMinUse        = 0.85
	outsideMinRate     = 0.80 // of the consumer's rate
	pauseMinUse        = 0.95
	maxProbeRate       = 10.0 // per second, in a pause no rejection times
	offMargin          = 0.01
)

// Quotas per second.
const (
	defaultRate = 200
	lowRate     = 20
)

// bursts are a quota's two bursts: 1 and 1 % of its limit, at least 1.
func bursts(c cell) [2]int { return [2]int{1, max(1, c.limit()/100)} }

// defaultCells lists the default cells (see TestMatrix), each once.
func defaultCells() []cell {
	var cells []cell
	seen := map[string]bool{}
	add := func(c cell, burstIndex int) {
		c.burst = bursts(c)[burstIndex%2]
		if !seen[c.name()] {
			seen[c.name()] = true
			cells = append(cells, c)
		}
	}
	for wi, w := range windows {
		for si, sh := range fleettest.Shapes() {
			add(cell{fleet: fleet8x16, window: w, shape: sh, scenario: steady, rate: defaultRate}, wi+si)
		}
	}
	for fi, f := range fleets {
		for sci, sc := range scenarios {
			for hi, sh := range []fleettest.Shape{fleettest.ShapeXRLUnixCeil, fleettest.ShapeIETF} {
				add(cell{fleet: f, window: sliding1s, shape: sh, scenario: sc, rate: defaultRate}, fi+sci+hi)
			}
		}
	}
	for hi, sh := range []fleettest.Shape{fleettest.ShapeRetryAfter, fleettest.ShapeStripe} {
		for sci, sc := range []scenario{outside, pause} {
			add(cell{fleet: fleet8x16, window: sliding1s, shape: sh, scenario: sc, rate: defaultRate}, hi+sci)
		}
	}
	for _, sh := range []fleettest.Shape{fleettest.ShapeXRLUnixCeil, fleettest.ShapeIETF} {
		for _, sc := range []scenario{steady, pause} {
			add(cell{fleet: fleet4x8, window: sliding1s, shape: sh, scenario: sc, rate: lowRate}, 0)
		}
	}
	return cells
}

// fullCells lists the full cross product, then the default low-rate
// cells.
func fullCells() []cell {
	var cells []cell
	for _, f := range fleets {
		for _, w := range windows {
			for _, sh := range fleettest.Shapes() {
				for _, sc := range scenarios {
					c := cell{fleet: f, window: w, shape: sh, scenario: sc, rate: defaultRate}
					for _, b := range bursts(c) {
						c.burst = b
						cells = append(cells, c)
						if bursts(c)[0] == bursts(c)[1] {
							break
						}
					}
				}
			}
		}
	}
	for _, c := range defaultCells() {
		if c.rate != defaultRate {
			cells = append(cells, c)
		}
	}
	return cells
}

// matrix holds what the cells share: the settings, one private Redis
// (each run has a namespace of its own), the baselines run so far and the
// table's rows. Cells run one after another, never in parallel: they
// measure timing on a two-core machine.
type matrix struct {
	scale     float64
	full      bool
	tablePath string
	rs        *redistest.Server

	offs map[string]*figures // by cell.offKey
	rows []row
}

func newMatrix(t *testing.T) *matrix {
	m := &matrix{scale: 1, offs: map[string]*figures{}, tablePath: os.Getenv("THROTTLE_MATRIX_TABLE")}
	if v := os.Getenv("THROTTLE_MATRIX_SCALE"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || !(s >= 1 && s <= 100) {
			t.Fatalf("THROTTLE_MATRIX_SCALE=%q: want a number in [1, 100]", v)
		}
		m.scale = s
	}
	switch v := os.Getenv("THROTTLE_MATRIX"); v {
	case "":
	case "full":
		m.full = true
	default:
		t.Fatalf(`THROTTLE_MATRIX=%q: want "full" or nothing`, v)
	}
	m.rs = redistest.Start(t)
	return m
}

// runOverhead is what a run costs beyond its duration: starting the
// race-enabled worker processes, the start delay, the exit (measured on
// two cores: 1.5 s for eight processes).
func runOverhead(c cell) time.Duration {
	return time.Second + time.Duration(c.fleet.processes())*70*time.Millisecond
}

// estimate is how long c takes, with its baseline unless ran holds it.
func (m *matrix) estimate(c cell, ran map[string]bool) time.Duration {
	one := c.timing(m.scale).run + runOverhead(c)
	if c.timing(m.scale).startOnWhole {
		one += 500 * time.Millisecond
	}
	if ran[c.offKey()] {
		return one
	}
	ran[c.offKey()] = true
	return 2 * one
}

// deadlineMargin is kept free before the test binary's deadline: the
// package's other tests run after TestMatrix (about two minutes), then
// the cleanups and goleak.
const deadlineMargin = 3 * time.Minute

// maxRuns bounds the runs of a cell's fleet (and of a baseline) when the
// machine's stalls could explain a failure (see runCell).
const maxRuns = 3

// runCell runs one cell and its baseline, gates it and adds its row.
//
// A failure the machine may have caused is run again, up to maxRuns runs
// in all: a run whose gates fail but would pass if the requests its
// measured stalls account for (figures.stallSlots) were granted; or a
// baseline that falls short of what the rules alone give (see
// baselineShort) within that grant. The gates themselves grant nothing:
// a cell still failing after its last run fails, marked in the table when
// its stalls could explain it. A failure no stall explains (the fleet
// far below the quota, arrivals in a pause) in a cell not listed as a
// known failure is run once more, and fails unless that run passes: the
// cells run fleets of real processes on a shared machine, where a rare
// failure in a cell that passes as a rule would otherwise fail the suite as surely as a
// systematic one (8x16_fixed-60s_xrl-unix-ceil_steady_b120 failed on
// vs off once in five CI runs of the matrix, every worker refused about
// sixteen requests beyond their deadline in two dips a couple of seconds
// apart, and passed in ten runs alone under -race; its cause is not
// found). The table keeps what the first run failed, and the workers'
// mode changes are logged to tell an outage trip apart. A failure that
// stands after its last run, when that run stalled, is judged against a
// paired control run at once (see control).
//
// A run in which a worker's Transport tripped to its outage mode (Redis,
// on the same two cores as the fleet, did not answer within the outage
// call timeout) counts as a stalled one: the outage mode and its return
// are the outage matrix's to judge (internal/faulttest), and they cost
// the run what feedback did not. Seen in CI: 8x16_fixed-60s_github_steady
// _b120 failed on vs off at 0.875 and 1.041 beside 1.097, every worker
// of both runs tripped at +60-90 ms for 250 ms (no worker of the
// baseline did), and under two busy loops beside it the same cell used
// 0.90-1.07 of its quota in the eight runs that tripped and 1.096-1.099
// in the others (2026-12-06). A failure that stands after the last run still fails,
// unless a paired control falls short as well.
func (m *matrix) runCell(t *testing.T, c cell) {
	r := row{cell: c, state: aborted}
	defer func() { m.rows = append(m.rows, r) }()
	if !m.fits(t, c) {
		r.state = notRun
		t.Fatalf("not run: the test binary's deadline is %v away; the cell needs about %v, and %v stay kept for the package's other tests; give go test a longer -timeout (see TestMatrix)",
			m.untilDeadline(t).Round(time.Second), m.estimate(c, m.ranOffs()).Round(time.Second), deadlineMargin)
	}
	off, ok := m.offs[c.offKey()]
	for run := 1; !ok; run++ {
		fr := runFleet(t, m.rs, c, true, m.scale)
		f := measure(fr)
		logRun(t, fr, f)
		if run < maxRuns && baselineShort(c, f, 0) && !baselineShort(c, f, f.stallSlots) && m.fits(t, c) {
			t.Logf("the baseline fell short while the machine stalled %v (worth %d requests): running it again", f.stalled.Round(time.Millisecond), f.stallSlots)
			continue
		}
		off, ok = &f, true
		m.offs[c.offKey()] = off
	}
	for r.runs = 1; ; r.runs++ {
		fr := runFleet(t, m.rs, c, false, m.scale)
		on := measure(fr)
		logRun(t, fr, on)
		r.on, r.off, r.state = on, off, done
		r.failures = gates(c, on, off, 0)
		r.stallsExplain = len(r.failures) > 0 && (len(gates(c, on, off, on.stallSlots)) == 0 || stallRejected(c, on) || on.tripped > 0)
		r.known = knownFailure(c.name())
		once := len(r.failures) > 0 && !r.stallsExplain && r.known == "" && r.failedOnce == nil
		if (!r.stallsExplain && !once) || r.runs == maxRuns || !m.fits(t, c) {
			break
		}
		if once {
			// A failure no stall explains, in a cell that passes as a
			// rule: run once more to tell a rare one from a systematic
			// one; the table keeps what the first run failed.
			r.failedOnce = r.failures
			t.Logf("failed (%s) with no stall to explain it: running the cell once more to tell a rare failure from a systematic one",
				strings.Join(r.failures, "; "))
			continue
		}
		t.Logf("failed (%s) while the machine stalled %v (worth %d requests) and %d workers tripped to the outage mode: running the cell again",
			strings.Join(r.failures, "; "), on.stalled.Round(time.Millisecond), on.stallSlots, on.tripped)
	}
	if len(r.failures) > 0 && r.known == "" && (r.on.stalled > 0 || r.on.tripped > 0) && m.fits(t, c) {
		m.control(t, c, &r)
	}
	for _, msg := range r.failures {
		switch {
		case r.known != "":
			t.Logf("known failure (%s): %s", r.known, msg)
		case r.machineBound:
			t.Logf("machine-bound (the rules alone, run just after, fell short too: %.3f; see control): %s", r.control.used, msg)
		default:
			t.Errorf("%s", msg)
		}
	}
	if r.known != "" && len(r.failures) == 0 {
		t.Logf("listed as a known failure (%s) but passed: take it off knownFailures", r.known)
	}
	t.Logf("%s", r.markdown())
}

// maxMachineBound is how many cells of a matrix may be judged against a
// paired control (see control) rather than their gates: more, and the
// machine stalled through so much of the matrix that it measured too
// little to pass. Two is one cell more than the worst CI run on record
// needed (one, 8x16_sliding-1s_retry-after_pause_b2, 2026-12-03).
const maxMachineBound = 2

// control runs the baseline of a cell whose last run failed while the
// machine stalled again, at once: the rules alone, on the same machine in
// the same minute. When they too fall short of what they give on a quiet
// machine (baselineShort), the machine could not deliver the quota then,
// neither to the rules alone nor to feedback, and the failure says
// nothing of feedback; the cell is then judged against that control
// instead of its gates (pairedGates): feedback must do no worse than the
// rules alone beside it. Seen in CI: the cell above ran three times at
// 147–186/s before its pause (no rejection yet, so no feedback acted),
// its baseline minutes earlier at 196/s, and passed at 0.980 on a quiet
// host. A control that reaches its level leaves the failure standing.
func (m *matrix) control(t *testing.T, c cell, r *row) {
	fr := runFleet(t, m.rs, c, true, m.scale)
	cf := measure(fr)
	logRun(t, fr, cf)
	if !baselineShort(c, cf, 0) {
		t.Logf("control: the rules alone, run just after, used %.3f: the machine did not hold the fleet back, the failure stands", cf.used)
		return
	}
	r.control = &cf
	r.controlFailures = pairedGates(c, r.on, cf)
	r.machineBound = len(r.controlFailures) == 0
	for _, msg := range r.controlFailures {
		t.Errorf("%s", msg)
	}
}

// pairedGates returns a message for every way a run did worse than its
// paired control (see control): less use (beyond offMargin), more
// rejections or failed calls; and for the gates no machine excuses, the
// pause's own (arrivals in it, probes).
func pairedGates(c cell, on, ctl figures) []string {
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	if on.used < ctl.used-offMargin {
		fail("gate paired use: feedback used %.3f, the rules alone run just after it %.3f, want on ≥ control − %.2f", on.used, ctl.used, offMargin)
	}
	if c.scenario == steady && on.rejected > ctl.rejected {
		fail("gate paired rejections: %d rejected, the rules alone run just after it %d, want no more", on.rejected, ctl.rejected)
	}
	if on.failed > ctl.failed {
		fail("gate paired failed calls: %d failed, the rules alone run just after it %d, want no more", on.failed, ctl.failed)
	}
	if c.scenario == pause {
		if c.shape.Timed() && on.inPause > 0 {
			fail("gate in pause: %d fleet requests arrived in the pause after the grace, want none", on.inPause)
		} else if !c.shape.Timed() && on.probeRate > maxProbeRate {
			fail("gate probes: %.1f/s fleet requests in the pause after the grace, want ≤ %.0f/s", on.probeRate, maxProbeRate)
		}
	}
	return fails
}

// stallRejected reports whether a run's rejections (a pause cell's:
// outside the pause) are all ones its stalls could explain: a reading
// fleet obeys the server's whole-second Retry-After, so such a rejection
// also costs a second's pause, which is the stall's too (the rules alone
// pay one request for it). Such a run is run again; the verdict still
// grants nothing. A pause cell's case was seen in CI:
// 8x16_sliding-1s_retry-after_pause_b2 met one rejection a second after
// the pause while the machine stalled 70 ms (15 requests' worth), paused
// for the Retry-After's second (0.769), and passed in 4 of 4 runs on a
// quiet host (0.978-0.980).
func stallRejected(c cell, on figures) bool {
	return (c.scenario == steady || c.scenario == pause) && on.rejected > 0 && on.rejected <= on.stallSlots
}

// fits reports whether c can still run before the test binary's deadline.
func (m *matrix) fits(t *testing.T, c cell) bool {
	_, ok := t.Deadline()
	return !ok || m.untilDeadline(t) >= m.estimate(c, m.ranOffs())+deadlineMargin
}

func (m *matrix) untilDeadline(t *testing.T) time.Duration {
	dl, _ := t.Deadline()
	return time.Until(dl)
}

func (m *matrix) ranOffs() map[string]bool {
	ran := map[string]bool{}
	for k := range m.offs {
		ran[k] = true
	}
	return ran
}

// baselineShort reports whether a baseline, granted allowance requests,
// falls short of what the rules alone give on a quiet machine: ~0.98 of
// the quota with no rejection when steady, and the pause gate's use
// outside a pause. An outside consumer's baseline has no such level.
func baselineShort(c cell, off figures, allowance int) bool {
	use := float64(off.accepted+allowance) / off.quota
	switch c.scenario {
	case steady:
		return use < steadyMinUse || off.rejected > allowance
	case pause:
		return use < pauseMinUse
	}
	return false
}

// gates returns a message for every gate the cell fails, naming the gate
// and its figures. allowance grants that many requests to every figure a
// stall can spoil (accepted requests, rejections): runCell asks with the
// run's stallSlots whether the machine could explain a failure; the
// verdict is given with none.
func gates(c cell, on figures, off *figures, allowance int) []string {
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	accepted := on.accepted + allowance
	rejected := max(on.rejected-allowance, 0)
	used := float64(accepted) / math.Max(on.quota, 1)
	switch c.scenario {
	case steady:
		if used < steadyMinUse {
			fail("gate use: the fleet's %d accepted requests are %.3f of the quota %.0f (%d/s over the run), want ≥ %.2f",
				on.accepted, on.used, on.quota, c.rate, steadyMinUse)
		}
		if rejected > 0 {
			fail("gate rejections: %d of the fleet's %d requests rejected, want none", on.rejected, on.sent)
		}
		if on.failed > 0 {
			fail("gate failed calls: %d calls failed without a response, want none", on.failed)
		}
	case outside:
		maxRej, minUse := outsideMaxRejected, outsideMinUse
		if !c.shape.ReportsQuota() {
			maxRej, minUse = looseMaxRejected, looseMinUse
		}
		if share := float64(rejected) / math.Max(float64(on.sent), 1); share > maxRej {
			fail("gate rejections: %d of the fleet's %d requests after the first window rejected (%.2f %%), want ≤ %.0f %%",
				on.rejected, on.sent, 100*on.rejectedShare(), 100*maxRej)
		}
		if used < minUse {
			fail("gate use: the fleet's %d accepted requests after the first window are %.3f of the %.0f that remain (the outside consumer got %d), want ≥ %.2f",
				on.accepted, on.used, on.quota, on.outsideAccepted, minUse)
		}
		if want := outsideShare * float64(c.rate) * outsideMinRate; on.outsideRate < want {
			fail("gate outside ran: the outside consumer sent %.1f/s, want ≥ %.1f/s: the scenario did not run as meant",
				on.outsideRate, want)
		}
	case pause:
		if c.shape.Timed() {
			if on.inPause > 0 {
				fail("gate in pause: %d fleet requests arrived in the pause after the grace (%v after the first rejection, which came %v into the pause), want none",
					on.inPause, on.grace.Round(time.Millisecond), on.told.Round(time.Millisecond))
			}
		} else if on.probeRate > maxProbeRate {
			fail("gate probes: %d fleet requests arrived in the pause after the grace, %.1f/s, want ≤ %.0f/s (the rejection names no time)",
				on.inPause, on.probeRate, maxProbeRate)
		}
		if used < pauseMinUse {
			fail("gate use: the fleet's %d accepted requests outside the pause are %.3f of its quota %.0f, want ≥ %.2f",
				on.accepted, on.used, on.quota, pauseMinUse)
		}
	}
	if off != nil && c.scenario != outside && used < off.used-offMargin {
		fail("gate on vs off: feedback used %.3f, the rules alone (WithoutFeedback) %.3f, want on ≥ off − %.2f",
			on.used, off.used, offMargin)
	}
	return fails
}

func (f figures) rejectedShare() float64 {
	if f.sent == 0 {
		return 0
	}
	return float64(f.rejected) / float64(f.sent)
}

// row is one cell's line of the table.
type row struct {
	cell     cell
	state    rowState
	on       figures
	off      *figures
	failures []string
	// runs is how many times the cell's fleet ran; stallsExplain that the
	// last run's stalls could explain its failure.
	runs          int
	stallsExplain bool
	// failedOnce holds the failures of a run no stall explained, when the
	// cell was run once more after it (see runCell).
	failedOnce []string
	// known is why the cell is a known failure (see knownFailures), or "".
	known string
	// control is the paired baseline run after a stalled failure, when
	// it fell short too (see matrix.control); machineBound that the run
	// did no worse than it, controlFailures how it did.
	control         *figures
	machineBound    bool
	controlFailures []string
}

// rowState is how far a cell got.
type rowState int

const (
	aborted rowState = iota // the harness failed the cell before its figures (see its log)
	notRun                  // too near the deadline to start
	done
)

const tableHeader = "| cell | fleet | window | headers | scenario | burst | quota | used | rejected | failed | in pause | off | stalls | result |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

func (r row) markdown() string {
	c := r.cell
	cols := []string{c.name(), c.fleet.name, c.window.name, c.shape.Name, string(c.scenario), strconv.Itoa(c.burst), c.quotaLabel()}
	switch r.state {
	case notRun:
		cols = append(cols, "–", "–", "–", "–", "–", "–", "NOT RUN (deadline)")
		return "| " + strings.Join(cols, " | ") + " |"
	case aborted:
		cols = append(cols, "–", "–", "–", "–", "–", "–", "FAIL: aborted (see the cell's log)")
		return "| " + strings.Join(cols, " | ") + " |"
	}
	inPause := "–"
	if c.scenario == pause {
		inPause = fmt.Sprintf("%d (+%d in %v grace)", r.on.inPause, r.on.inGrace, r.on.grace.Round(time.Millisecond))
		if !c.shape.Timed() {
			inPause = fmt.Sprintf("%d, %.1f/s (+%d in grace)", r.on.inPause, r.on.probeRate, r.on.inGrace)
		}
	}
	off := "–"
	if r.off != nil {
		off = fmt.Sprintf("%.3f", r.off.used)
		if c.scenario == outside {
			off += fmt.Sprintf(" (%.1f %% rej., not gated)", 100*r.off.rejectedShare())
		} else if r.off.rejected > 0 {
			off += fmt.Sprintf(" (%d rej.)", r.off.rejected)
		}
	}
	result := "PASS"
	if len(r.failures) > 0 {
		result = "FAIL: " + gateNames(r.failures)
		if r.stallsExplain {
			result += " (stalls could explain it)"
		}
		if r.control != nil {
			if r.machineBound {
				result += fmt.Sprintf(" (machine-bound: the rules alone just after %.3f, no better)", r.control.used)
			} else {
				result += fmt.Sprintf(" (worse than the rules alone just after, %.3f: %s)", r.control.used, gateNames(r.controlFailures))
			}
		}
		if r.known != "" {
			result += " (known)"
		}
	}
	if r.runs > 1 {
		result += fmt.Sprintf(" (run %d times)", r.runs)
	}
	if len(r.failedOnce) > 0 && len(r.failures) == 0 {
		result += " (failed once: " + gateNames(r.failedOnce) + ")"
	}
	cols = append(cols,
		fmt.Sprintf("%.3f", r.on.used),
		fmt.Sprintf("%.2f %%", 100*r.on.rejectedShare()),
		strconv.Itoa(r.on.failed),
		inPause, off,
		r.stallsCell(),
		result)
	return "| " + strings.Join(cols, " | ") + " |"
}

// gateNames lists the names of the gates of failure messages ("gate use:
// ..." is "use").
func gateNames(fails []string) string {
	names := make([]string, len(fails))
	for i, f := range fails {
		names[i], _, _ = strings.Cut(strings.TrimPrefix(f, "gate "), ":")
	}
	return strings.Join(names, ", ")
}

// report logs the table and writes it to THROTTLE_MATRIX_TABLE when set.
func (m *matrix) report(t *testing.T) {
	var b strings.Builder
	b.WriteString(tableHeader + "\n")
	pass, known, bound := 0, 0, 0
	for _, r := range m.rows {
		b.WriteString(r.markdown() + "\n")
		switch {
		case r.state == done && len(r.failures) == 0:
			pass++
		case r.known != "":
			known++
		case r.machineBound:
			bound++
		}
	}
	fmt.Fprintf(&b, "\n%d of %d cells pass, %d fail as known, %d machine-bound (scale %v).\n", pass, len(m.rows), known, bound, m.scale)
	if bound > maxMachineBound {
		t.Errorf("%d cells machine-bound, want ≤ %d: the machine stalled through too much of the matrix to measure it", bound, maxMachineBound)
	}
	t.Logf("scenario matrix:\n%s", b.String())
	if m.tablePath != "" {
		if err := os.WriteFile(m.tablePath, []byte(b.String()), 0o644); err != nil {
			t.Errorf("write THROTTLE_MATRIX_TABLE: %v", err)
		}
	}
}

// TestMatrixCells checks the cell lists: unique names, the default cells
// cover what TestMatrix promises.
func TestMatrixCells(t *testing.T) {
	for _, list := range []struct {
		name  string
		cells []cell
	}{{"default", defaultCells()}, {"full", fullCells()}} {
		seen := map[string]bool{}
		for _, c := range list.cells {
			if seen[c.name()] {
				t.Errorf("%s: cell %s listed twice", list.name, c.name())
			}
			seen[c.name()] = true
		}
		m := &matrix{scale: 1}
		var est time.Duration
		ran := map[string]bool{}
		for _, c := range list.cells {
			est += m.estimate(c, ran)
		}
		t.Logf("%s: %d cells, %d baselines, about %v", list.name, len(list.cells), len(ran), est.Round(time.Second))
	}
	type key struct {
		fleet    string
		scenario scenario
		burst    int
	}
	met := map[key]bool{}
	windowShape := map[string]bool{}
	for _, c := range defaultCells() {
		met[key{c.fleet.name, c.scenario, c.burst}] = true
		if c.fleet.name == fleet8x16.name && c.scenario == steady {
			windowShape[c.window.name+" "+c.shape.Name] = true
		}
	}
	for _, f := range fleets {
		for _, sc := range scenarios {
			if !met[key{f.name, sc, 1}] && !met[key{f.name, sc, 2}] {
				t.Errorf("fleet %s never meets scenario %s", f.name, sc)
			}
		}
		if !met[key{f.name, steady, 1}] && !met[key{f.name, outside, 1}] && !met[key{f.name, pause, 1}] {
			t.Errorf("fleet %s never meets burst 1", f.name)
		}
		if !met[key{f.name, steady, 2}] && !met[key{f.name, outside, 2}] && !met[key{f.name, pause, 2}] {
			t.Errorf("fleet %s never meets burst 2", f.name)
		}
	}
	for _, w := range windows {
		for _, sh := range fleettest.Shapes() {
			if !windowShape[w.name+" "+sh.Name] {
				t.Errorf("shape %s never meets window %s with 8x16", sh.Name, w.name)
			}
		}
	}
}

// stallsCell is the table's stalls column: the last run's stall time and
// what it accounts for, and its outage trips (see figures.tripped).
func (r row) stallsCell() string {
	cell := fmt.Sprintf("%v (%d req.)", r.on.stalled.Round(time.Millisecond), r.on.stallSlots)
	if r.on.tripped > 0 {
		cell += fmt.Sprintf(", %d tripped", r.on.tripped)
	}
	return cell
}
