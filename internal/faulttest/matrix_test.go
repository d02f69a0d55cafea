package faulttest_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestOutageMatrix is issue 11's fault matrix: fleets of real worker
// processes sharing one bucket in a private Redis, against a strict
// server whose quota the rule equals (rate per 1 s sliding log,
// fleettest.WithQuota, no rate-limit header), while Redis fails. One cell
// per combination of
//
//   - fleet: 1x32 (one process of 32 goroutines), 4x8 and 8x16
//     (processes × goroutines), busy+7idle (one process of 16 goroutines
//     beside seven sending one request a second each);
//   - rate: 20/s, 200/s, 1000/s;
//   - burst: 1, or 1 % of the rate (at least 1);
//   - fault: kill (SIGKILL, then a restart with an empty memory and
//     script cache) or stall (SIGSTOP, then SIGCONT).
//
// The cells cover: every fleet meets every rate, and both bursts (at 20/s
// both are 1, so the 1 % burst comes at 200/s or 1000/s), each with both
// faults: 12 fleet × rate × burst combinations, 24 cells. The transport
// has the defaults: ModeFallback, DefaultRedisTimeout, the default retry
// policy and headroom.
//
// Each cell's timeline, from the common start: 2.5 s on the shared bucket
// (every replica's heartbeat has counted the fleet twice), the outage —
// 10 s for the stall, as the issue asks, and 8 s for the kill (the
// fallback settles within a second of either; the two seconds less keep
// the 24 cells and their reruns within go test's default 10 minutes on a
// two-core machine) — then 5 s after Redis answers again. About 9
// minutes in all:
//
//	go test -race -count=1 -p 1 ./internal/faulttest/
//	go test -race -count=1 -run 'TestOutageMatrix/8x16_200rps_b1_' -v ./internal/faulttest/
//
// Environment:
//
//   - THROTTLE_OUTAGE_SCALE=3 lengthens every phase of every cell (the
//     outage included) three times; any number in [1, 100]. Give go test a
//     -timeout to match (about 9 minutes × the scale).
//   - THROTTLE_OUTAGE_TABLE=path writes the table, in markdown, to path.
//
// A Redis test never skips, -short or not. A cell that would run into the last
// deadlineMargin before the test binary's deadline is not started: it
// fails, naming the -timeout to give, and the table still prints.
//
// # Gates
//
// Each cell fails with a message naming the gate and its figures:
//
//   - failed: no call failed (a call without a response, other than those
//     the run's end cuts off: a slot beyond the run's deadline);
//   - switch, return, window: every 1 s window of arrivals at the server
//     (rejected ones included) holds at most the rule plus its burst plus
//     5 %. The whole run is checked, in three parts named by where the
//     window starts: the switch span [fault − 1 s, fault + 2 s) (the
//     slots booked in Redis before the fault depart up to a queue's
//     depth after it: 1.6 s for 32 goroutines at 20/s), the return span
//     [return − 1 s, the run's end) (replicas return within about 1.25 s
//     and leave their 2 s grace period after it), and anywhere else (the
//     shared bucket before the fault, the outage's steady state);
//   - use-outage, use-after: the accepted requests are ≥ 0.95 of the
//     quota over the outage (from the fault to the return's call) and
//     over the 5 s after Redis answers again.
//
// # Stalls
//
// A machine that stalls a process spoils these figures: the requests
// whose slots fell in the stall leave together (a busy window), or late
// (less use). A cell whose failures (other than its known ones) would all
// pass if the requests the stalls measured in each window or span
// account for were granted is run again, up to maxRuns runs; the verdict
// grants nothing. A cell still failing is marked in the table when its
// stalls could explain it.
//
// # Known failures
//
// The product fails some cells today (issue 11): knownFailures lists
// them, by cell and gate, with the figures measured. Their gates are
// measured, printed and written to the table, marked "known", and logged
// instead of failing the test, so that every other gate holds in CI; a
// listed gate that passes is logged, to be taken off the list.
func TestOutageMatrix(t *testing.T) {
	m := newMatrix(t)
	cs := cells()
	var est time.Duration
	for _, c := range cs {
		est += m.estimate(c)
	}
	t.Logf("%d cells, about %v (scale %v; -run selects fewer)", len(cs), est.Round(time.Second), m.scale)
	for _, c := range cs {
		t.Run(c.name(), func(t *testing.T) { m.runCell(t, c) })
	}
	m.report(t)
}

// The timeline before THROTTLE_OUTAGE_SCALE (see TestOutageMatrix).
const (
	beforeFault = 2500 * time.Millisecond
	killOutage  = 8 * time.Second
	stallOutage = 10 * time.Second
	afterReturn = 5 * time.Second
	// returnSlack lengthens the run for the return's own time (a
	// restart's start-up), so that the after phase is whole.
	returnSlack = 300 * time.Millisecond
)

// Gates' figures (see TestOutageMatrix).
const (
	windowMargin = 0.05
	minUse       = 0.95
)

// The matrix's rates per second.
var rates = []int{20, 200, 1000}

// cells lists the matrix's cells: for the i-th fleet, 20/s with burst 1,
// and at 200/s and 1000/s one of each burst, the order alternating with
// i, so that 8x16 meets 200/s with burst 1 (the case); each with
// both faults.
func cells() []cell {
	var out []cell
	for i, sh := range shapes {
		for _, rate := range rates {
			pct := max(1, rate/100)
			b := 1
			switch {
			case rate == 200 && i%2 == 1, rate == 1000 && i%2 == 0:
				b = pct
			}
			for _, f := range faults {
				out = append(out, cell{shape: sh, rate: rate, burst: b, fault: f})
			}
		}
	}
	return out
}

// matrix holds what the cells share: the settings, one private Redis
// (each run has a namespace of its own) and the table's rows. Cells run
// one after another, never in parallel: they measure timing on a
// two-core machine.
type matrix struct {
	scale     float64
	tablePath string
	rs        *redistest.Server
	rows      []row
}

func newMatrix(t *testing.T) *matrix {
	m := &matrix{scale: 1, tablePath: os.Getenv("THROTTLE_OUTAGE_TABLE")}
	if v := os.Getenv("THROTTLE_OUTAGE_SCALE"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || !(s >= 1 && s <= 100) {
			t.Fatalf("THROTTLE_OUTAGE_SCALE=%q: want a number in [1, 100]", v)
		}
		m.scale = s
	}
	m.rs = redistest.Start(t)
	return m
}

// runOverhead is what a run costs beyond its duration: starting the
// race-enabled worker processes, the start delay, the restart, the exit.
func runOverhead(c cell) time.Duration {
	return 1500*time.Millisecond + time.Duration(fleettest.Processes(c.shape.groups...))*100*time.Millisecond
}

// estimate is how long one run of c takes.
func (m *matrix) estimate(c cell) time.Duration { return c.timing(m.scale).run() + runOverhead(c) }

// deadlineMargin is kept free before the test binary's deadline for the
// package's other test (TestFleetSurvivesRedisKill, about 12 s under
// -race), the cleanups and goleak.
const deadlineMargin = 40 * time.Second

// maxRuns bounds the runs of a cell whose failures the machine's stalls
// could explain (see runCell).
const maxRuns = 2

// runCell runs one cell, gates it and adds its row. A cell whose
// unlisted failures would all pass with its stalls' requests granted is
// run again, up to maxRuns runs, if it fits before the deadline; the
// verdict grants nothing.
func (m *matrix) runCell(t *testing.T, c cell) {
	r := row{cell: c, state: aborted}
	defer func() { m.rows = append(m.rows, r) }()
	if !m.fits(t, c) {
		r.state = notRun
		dl, _ := t.Deadline()
		t.Fatalf("not run: the test binary's deadline is %v away; the cell needs about %v, and %v stay kept for the package's other test; give go test a longer -timeout (see TestOutageMatrix)",
			time.Until(dl).Round(time.Second), m.estimate(c).Round(time.Second), deadlineMargin)
	}
	for r.runs = 1; ; r.runs++ {
		run := runOutage(t, m.rs, c, m.scale, r.runs)
		f := measure(run)
		logRun(t, run, f)
		r.fig, r.state = f, done
		r.failures = gates(run, f, false)
		granted := gates(run, f, true)
		r.stallsExplain = len(r.failures) > 0 && len(granted) == 0
		unknown := unlisted(c, r.failures)
		if len(unknown) == 0 || len(unlisted(c, granted)) > 0 || r.runs == maxRuns || !m.fits(t, c) {
			break
		}
		t.Logf("failed (%s) while the machine stalled %v: running the cell again", joinMsgs(unknown), f.stalled.Round(time.Millisecond))
	}
	for _, g := range r.failures {
		if k := knownFailureOf(c.name(), g.gate); k != nil {
			t.Logf("known failure (%s; measured before: %s): %s", k.why, k.measured, g.msg)
			continue
		}
		t.Errorf("%s", g.msg)
	}
	for _, k := range knownFailures {
		if strings.Contains(c.name(), k.match) && !hasGate(r.failures, k.gate) {
			t.Logf("listed as a known failure of gate %s (%s) but passed: take it off knownFailures", k.gate, k.measured)
		}
	}
	t.Logf("%s", r.markdown())
}

// unlisted returns the failures that knownFailures does not list.
func unlisted(c cell, fails []gateFailure) []gateFailure {
	var out []gateFailure
	for _, g := range fails {
		if knownFailureOf(c.name(), g.gate) == nil {
			out = append(out, g)
		}
	}
	return out
}

func hasGate(fails []gateFailure, gate string) bool {
	for _, g := range fails {
		if g.gate == gate {
			return true
		}
	}
	return false
}

func joinMsgs(fails []gateFailure) string {
	msgs := make([]string, len(fails))
	for i, g := range fails {
		msgs[i] = g.msg
	}
	return strings.Join(msgs, "; ")
}

// fits reports whether c can still run before the test binary's
// deadline.
func (m *matrix) fits(t *testing.T, c cell) bool {
	dl, ok := t.Deadline()
	return !ok || time.Until(dl) >= m.estimate(c)+deadlineMargin
}

// row is one cell's line of the table.
type row struct {
	cell     cell
	state    rowState
	fig      figures
	failures []gateFailure
	// runs is how many times the cell ran; stallsExplain that the last
	// run's stalls could explain all its failures.
	runs          int
	stallsExplain bool
}

// rowState is how far a cell got.
type rowState int

const (
	aborted rowState = iota // the harness failed the cell before its figures (see its log)
	notRun                  // too near the deadline to start
	done
)

const tableHeader = "| fleet | rate | burst | fault | switch window | return window | use during outage | use after return | failed calls | stalls | result |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|"

func (r row) markdown() string {
	c := r.cell
	cols := []string{c.shape.name, fmt.Sprintf("%d/s", c.rate), strconv.Itoa(c.burst), string(c.fault)}
	switch r.state {
	case notRun:
		cols = append(cols, "–", "–", "–", "–", "–", "–", "NOT RUN (deadline)")
		return "| " + strings.Join(cols, " | ") + " |"
	case aborted:
		cols = append(cols, "–", "–", "–", "–", "–", "–", "FAIL: aborted (see the cell's log)")
		return "| " + strings.Join(cols, " | ") + " |"
	}
	f := r.fig
	result := "PASS"
	if len(r.failures) > 0 {
		var names []string
		allKnown := true
		for _, g := range r.failures {
			name := g.gate
			if knownFailureOf(c.name(), g.gate) != nil {
				name += " (known)"
			} else {
				allKnown = false
			}
			names = append(names, name)
		}
		result = "FAIL: " + strings.Join(names, ", ")
		if allKnown {
			result = "known FAIL: " + strings.Join(names, ", ")
		}
		if r.stallsExplain {
			result += " (stalls could explain it)"
		}
	}
	if r.runs > 1 {
		result += fmt.Sprintf(" (run %d times)", r.runs)
	}
	limit := c.windowLimit()
	cols = append(cols,
		fmt.Sprintf("%d / %d", f.switched.n, limit),
		fmt.Sprintf("%d / %d", f.back.n, limit),
		fmt.Sprintf("%.3f", f.useOutage),
		fmt.Sprintf("%.3f", f.useAfter),
		strconv.Itoa(f.failed),
		f.stalled.Round(time.Millisecond).String(),
		result)
	return "| " + strings.Join(cols, " | ") + " |"
}

// report logs the table and writes it to THROTTLE_OUTAGE_TABLE when set.
func (m *matrix) report(t *testing.T) {
	var b strings.Builder
	b.WriteString(tableHeader + "\n")
	pass, known := 0, 0
	for _, r := range m.rows {
		b.WriteString(r.markdown() + "\n")
		switch {
		case r.state == done && len(r.failures) == 0:
			pass++
		case r.state == done && len(unlisted(r.cell, r.failures)) == 0:
			known++
		}
	}
	fmt.Fprintf(&b, "\nWindows: the busiest 1 s window starting in the switch span [fault − 1 s, fault + 2 s) and in the return span [return − 1 s, the run's end), / the limit (rule + burst + 5 %%).\n")
	fmt.Fprintf(&b, "%d of %d cells pass, %d fail only as known (scale %v).\n", pass, len(m.rows), known, m.scale)
	t.Logf("outage matrix:\n%s", b.String())
	if m.tablePath != "" {
		if err := os.WriteFile(m.tablePath, []byte(b.String()), 0o644); err != nil {
			t.Errorf("write THROTTLE_OUTAGE_TABLE: %v", err)
		}
	}
}

// TestOutageMatrixCells checks the cell list: unique names, and the
// coverage TestOutageMatrix promises.
func TestOutageMatrixCells(t *testing.T) {
	seen := map[string]bool{}
	type pair struct {
		shape string
		v     int
	}
	rate, burst := map[pair]bool{}, map[pair]bool{}
	faultsOf := map[string]map[fault]bool{}
	for _, c := range cells() {
		if seen[c.name()] {
			t.Errorf("cell %s listed twice", c.name())
		}
		seen[c.name()] = true
		rate[pair{c.shape.name, c.rate}] = true
		kind := 1
		if c.burst > 1 {
			kind = 100
		}
		burst[pair{c.shape.name, kind}] = true
		key := fmt.Sprintf("%s_%d_%d", c.shape.name, c.rate, c.burst)
		if faultsOf[key] == nil {
			faultsOf[key] = map[fault]bool{}
		}
		faultsOf[key][c.fault] = true
	}
	for _, sh := range shapes {
		for _, r := range rates {
			if !rate[pair{sh.name, r}] {
				t.Errorf("fleet %s never meets %d/s", sh.name, r)
			}
		}
		if !burst[pair{sh.name, 1}] || !burst[pair{sh.name, 100}] {
			t.Errorf("fleet %s does not meet both bursts (1 and 1 %% of the rate)", sh.name)
		}
	}
	for key, fs := range faultsOf {
		if len(fs) != len(faults) {
			t.Errorf("%s runs with faults %v, want all of %v", key, fs, faults)
		}
	}
	if !seen["8x16_200rps_b1_kill"] {
		t.Error("the issue's case, 8x16 at 200/s with burst 1, is not a cell")
	}
	m := &matrix{scale: 1}
	var est time.Duration
	for _, c := range cells() {
		est += m.estimate(c)
	}
	t.Logf("%d cells, about %v", len(cells()), est.Round(time.Second))
	for _, k := range knownFailures {
		if !seenMatch(seen, k.match) {
			t.Errorf("known failure %q matches no cell", k.match)
		}
	}
}

func seenMatch(seen map[string]bool, match string) bool {
	for name := range seen {
		if strings.Contains(name, match) {
			return true
		}
	}
	return false
}
