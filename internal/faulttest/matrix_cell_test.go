package faulttest_test

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/faulttest"
	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// fleetShape is one shape of fleet: groups of identical worker processes
// sharing one bucket through Redis.
type fleetShape struct {
	name   string
	groups []fleettest.Group
}

// The fleets of the matrix. busy+7idle's idle processes send one request
// a second each, enough to beat (and so to count as replicas) every
// second.
var (
	shape1x32 = fleetShape{"1x32", []fleettest.Group{{N: 1, Goroutines: 32}}}
	shape4x8  = fleetShape{"4x8", []fleettest.Group{{N: 4, Goroutines: 8}}}
	shape8x16 = fleetShape{"8x16", []fleettest.Group{{N: 8, Goroutines: 16}}}
	shapeIdle = fleetShape{"busy+7idle", []fleettest.Group{{N: 1, Goroutines: 16}, {N: 7, Goroutines: 1, Interval: time.Second}}}
	shapes    = []fleetShape{shape1x32, shape4x8, shape8x16, shapeIdle}
)

// fault is what happens to the fleet's Redis mid-run.
type fault string

const (
	// kill: SIGKILL, then, after the outage, a new process on the same
	// port with an empty memory and script cache (redistest.Restart).
	kill fault = "kill"
	// stall: SIGSTOP for the outage, then SIGCONT (redistest.Pause,
	// Resume): connections stay open and calls hang.
	stall fault = "stall"
)

var faults = []fault{kill, stall}

// cell is one run of the matrix: a fleet on a rule equal to a strict
// server's quota (rate per 1 s sliding log, the rule's burst), and a
// fault.
type cell struct {
	shape fleetShape
	rate  int // per second: the quota's limit and the rule's rate
	burst int
	fault fault
}

// name is the cell's subtest name, such as "8x16_200rps_b1_kill"; -run
// 'TestOutageMatrix/<name>' selects it (escape the "+" of busy+7idle).
func (c cell) name() string {
	return fmt.Sprintf("%s_%drps_b%d_%s", c.shape.name, c.rate, c.burst, c.fault)
}

// windowLimit is the gate on every 1 s window: the rule plus its burst,
// plus 5 %.
func (c cell) windowLimit() int { return int(math.Floor(float64(c.rate+c.burst) * (1 + windowMargin))) }

// timing is one run's timeline, from the common start.
type timing struct {
	before, outage, after time.Duration
}

// run is the workers' Duration: the return's own time (a restart takes
// tens of milliseconds, more on a loaded machine) comes on top, so that
// the after phase is whole.
func (tm timing) run() time.Duration { return tm.before + tm.outage + tm.after + returnSlack }

func (c cell) timing(scale float64) timing {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	out := killOutage
	if c.fault == stall {
		out = stallOutage
	}
	return timing{before: sc(beforeFault), outage: sc(out), after: sc(afterReturn)}
}

// outageRun is what one run of a cell left, times as offsets from the
// server's epoch.
type outageRun struct {
	cell     cell
	epoch    time.Time
	start    time.Duration
	end      time.Duration // the workers' end
	faulted  time.Duration // the kill or SIGSTOP was sent
	called   time.Duration // Restart or SIGCONT was called
	returned time.Duration // Redis answers again (Restart returned; SIGCONT sent)
	after    time.Duration // the after phase's length
	arrivals fleettest.Arrivals
	sums     []fleettest.Summary
	stalls   []fleettest.Stall // the workers' and this process's
	modes    [][]faulttest.ModeRecord
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// runOutage runs c once against a fresh strict server, under a Redis
// namespace of its own (a stalled Redis keeps its keys).
func runOutage(t *testing.T, rs *redistest.Server, c cell, scale float64, attempt int) *outageRun {
	t.Helper()
	tm := c.timing(scale)
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: c.rate, Window: time.Second}))
	base := fleettest.WorkerConfig{
		URL:        srv.URL + "/api",
		RedisAddrs: []string{rs.Addr()},
		Namespace:  fmt.Sprintf("outage-%s-%d", nonName.ReplaceAllString(c.name(), "-"), attempt),
		Rules:      []fleettest.RuleConfig{{Name: "api", Rate: c.rate, Period: time.Second, Burst: c.burst}},
		// The defaults are what is tested: ModeFallback,
		// DefaultRedisTimeout, the default retry policy; only the mode
		// log is extra.
		Duration: tm.run(),
	}
	cfgs := fleettest.Configs(base, c.shape.groups...)
	dir := t.TempDir()
	logs := make([]string, len(cfgs))
	for i := range cfgs {
		logs[i] = filepath.Join(dir, fmt.Sprintf("modes-%d.jsonl", i))
		cfgs[i].Extra = map[string]string{faulttest.ExtraModeLog: logs[i]}
	}

	fleet := fleettest.Start(t, cfgs...)
	watch := fleettest.WatchStalls(t)
	start := fleet.Go()
	r := &outageRun{cell: c, epoch: srv.Epoch(), start: srv.Offset(start), after: tm.after}
	r.end = r.start + tm.run()
	time.Sleep(time.Until(start.Add(tm.before)))
	faulted := time.Now()
	if c.fault == kill {
		rs.Kill()
	} else {
		rs.Pause()
	}
	time.Sleep(time.Until(faulted.Add(tm.outage)))
	called := time.Now()
	if c.fault == kill {
		rs.Restart() // returns once the new process answers
	} else {
		rs.Resume()
	}
	returned := time.Now()
	r.faulted, r.called, r.returned = srv.Offset(faulted), srv.Offset(called), srv.Offset(returned)
	r.sums = fleet.Wait()
	r.stalls = append(fleettest.Stalls(r.sums), watch()...)
	r.arrivals = srv.Arrivals().Fleet()
	for i, path := range logs {
		recs, err := faulttest.ReadModeLog(path)
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		r.modes = append(r.modes, recs)
	}
	return r
}

// busiest is the busiest 1 s window of a span of window starts.
type busiest struct {
	n   int
	win fleettest.Window
}

// figures is what a run measured, for the gates and the table.
type figures struct {
	// switched and back are the busiest 1 s windows starting in the
	// switch span [fault − 1 s, fault + 2 s) and the return span
	// [return − 1 s, the run's end); elsewhere the busiest starting
	// anywhere else: on the shared bucket before the fault, or in the
	// outage's steady state.
	switched, back, elsewhere busiest
	// useOutage and useAfter are the accepted (200) requests over the
	// quota of [fault, return) and of the after phase from the return.
	useOutage, useAfter float64
	// failed counts the calls that failed without a response, beyond
	// the run's end (errors every run ends with).
	failed    int
	statuses  map[int]int
	errors    map[string]int
	samples   []string
	stalled   time.Duration // stall time over the run, overlaps once
	outageLen time.Duration
	afterLen  time.Duration
	// slowestSwitch and slowestReturn are the workers' slowest change
	// to fallback after the fault and back to shared after the return,
	// from the mode logs; modeErr says what the logs lacked.
	slowestSwitch, slowestReturn time.Duration
	modeErr                      string
}

// measure works out the figures of a run.
func measure(r *outageRun) figures {
	c := r.cell
	tot := fleettest.Totals(r.sums)
	f := figures{statuses: tot.Statuses, errors: tot.Errors, samples: tot.Samples}
	for kind, n := range tot.Errors {
		if kind != fleettest.ErrKindBeyondDeadline && kind != fleettest.ErrKindContext {
			f.failed += n
		}
	}
	f.stalled = fleettest.StallTime(r.stalls, r.epoch, fleettest.Window{From: r.start, To: r.end})

	times := r.arrivals.Times()
	first, last, _ := fleettest.Span(times)
	swFrom, swTo := r.faulted-time.Second, r.faulted+2*time.Second
	backFrom, backTo := r.returned-time.Second, max(last+1, r.end)
	at := func(from, to time.Duration) busiest {
		n, w := fleettest.MaxInWindowStarting(times, time.Second, from, to)
		return busiest{n, w}
	}
	f.switched, f.back = at(swFrom, swTo), at(backFrom, backTo)
	for _, b := range []busiest{at(first, swFrom), at(swTo, backFrom)} {
		if b.n > f.elsewhere.n {
			f.elsewhere = b
		}
	}

	ok := r.arrivals.Status(http.StatusOK).Times()
	use := func(from, to time.Duration) float64 {
		if to <= from {
			return 0
		}
		return float64(fleettest.CountIn(ok, from, to)) / (float64(c.rate) * (to - from).Seconds())
	}
	afterTo := min(r.returned+r.after, r.end)
	f.outageLen, f.afterLen = r.called-r.faulted, afterTo-r.returned
	f.useOutage, f.useAfter = use(r.faulted, r.called), use(r.returned, afterTo)

	f.slowestSwitch, f.slowestReturn, f.modeErr = slowestModes(r)
	return f
}

// slowestModes reads the workers' mode logs: the slowest switch to
// fallback after the fault and the slowest return to shared after Redis
// answered again. They are logged, not gated (TestFleetSurvivesRedisKill
// gates them).
func slowestModes(r *outageRun) (sw, back time.Duration, problem string) {
	faulted, returned := r.epoch.Add(r.faulted), r.epoch.Add(r.returned)
	var problems []string
	for i, recs := range r.modes {
		s, b, err := switchAndReturn(recs, faulted, returned)
		if err != nil {
			problems = append(problems, fmt.Sprintf("worker %d: %v", i, err))
			continue
		}
		sw, back = max(sw, s), max(back, b)
	}
	return sw, back, strings.Join(problems, "; ")
}

// stallSlots is what the stalls measured in win can account for, in
// requests at the rule's rate: a stalled process sends late together
// the requests whose slots fell in the stall.
func (r *outageRun) stallSlots(win fleettest.Window) int {
	d := fleettest.StallTime(r.stalls, r.epoch, win)
	interval := time.Second / time.Duration(r.cell.rate)
	return int((d + interval - 1) / interval)
}

// gateFailure is one gate a run failed: the gate's name (as
// knownFailures names it) and a message with its figures.
type gateFailure struct {
	gate, msg string
}

// Gate names.
const (
	gateFailed    = "failed"
	gateSwitch    = "switch"
	gateReturn    = "return"
	gateWindow    = "window" // any 1 s window outside the switch and return spans
	gateUseOutage = "use-outage"
	gateUseAfter  = "use-after"
)

// gates returns the gates r fails. With grant, every figure a stall can
// spoil gets the requests the stalls measured in its window or span
// account for: runCell asks so whether the machine could explain a
// failure; the verdict is given without.
func gates(r *outageRun, f figures, grant bool) []gateFailure {
	c := r.cell
	var fails []gateFailure
	fail := func(gate, format string, args ...any) {
		fails = append(fails, gateFailure{gate, fmt.Sprintf("gate %s: ", gate) + fmt.Sprintf(format, args...)})
	}
	slots := func(w fleettest.Window) int {
		if !grant {
			return 0
		}
		return r.stallSlots(w)
	}
	if f.failed > 0 {
		fail(gateFailed, "%d calls failed (%v; samples %q), want none", f.failed, f.errors, f.samples)
	}
	limit := c.windowLimit()
	for _, w := range []struct {
		gate, what string
		b          busiest
		from       time.Duration
	}{
		{gateSwitch, "the fault", f.switched, r.faulted},
		{gateReturn, "the return", f.back, r.returned},
		{gateWindow, "the run's start", f.elsewhere, r.start},
	} {
		if w.b.n > limit+slots(w.b.win) {
			fail(w.gate, "%d arrivals in the 1 s window from %v after %s, want ≤ %d (rule %d + burst %d + 5 %%)",
				w.b.n, (w.b.win.From - w.from).Round(time.Millisecond), w.what, limit, c.rate, c.burst)
		}
	}
	for _, u := range []struct {
		gate, what string
		use        float64
		span       fleettest.Window
	}{
		{gateUseOutage, "the outage", f.useOutage, fleettest.Window{From: r.faulted, To: r.called}},
		{gateUseAfter, "the time after the return", f.useAfter, fleettest.Window{From: r.returned, To: r.returned + f.afterLen}},
	} {
		grantUse := float64(slots(u.span)) / (float64(c.rate) * u.span.Len().Seconds())
		if u.use+grantUse < minUse {
			fail(u.gate, "the fleet's accepted requests over %s (%v) are %.3f of the quota, want ≥ %.2f",
				u.what, u.span.Len().Round(time.Millisecond), u.use, minUse)
		}
	}
	return fails
}

// logRun logs what a run did, second by second and worker by worker.
func logRun(t *testing.T, r *outageRun, f figures) {
	t.Helper()
	times := r.arrivals.Times()
	ps := fleettest.PerSecond(times, r.start)
	t.Logf("%s: fault at %v, return called at %v, Redis answering at %v (from the start)",
		r.cell.name(), (r.faulted - r.start).Round(time.Millisecond), (r.called - r.start).Round(time.Millisecond),
		(r.returned - r.start).Round(time.Millisecond))
	t.Logf("  arrivals/s %v", ps)
	t.Logf("  accepted/s %v", fleettest.PerSecond(r.arrivals.Status(http.StatusOK).Times(), r.start))
	t.Logf("  busiest 1 s windows: switch %d from %v after the fault, return %d from %v after the return, elsewhere %d at %v from the start (limit %d)",
		f.switched.n, (f.switched.win.From - r.faulted).Round(time.Millisecond), f.back.n,
		(f.back.win.From - r.returned).Round(time.Millisecond), f.elsewhere.n,
		(f.elsewhere.win.From - r.start).Round(time.Millisecond), r.cell.windowLimit())
	t.Logf("  use: outage %.3f over %v, after the return %.3f over %v; statuses %v, errors %v, failed %d; stalls %v",
		f.useOutage, f.outageLen.Round(time.Millisecond), f.useAfter, f.afterLen.Round(time.Millisecond),
		f.statuses, f.errors, f.failed, f.stalled.Round(time.Millisecond))
	if f.modeErr != "" {
		t.Logf("  mode logs: %s", f.modeErr)
	} else {
		t.Logf("  slowest switch to fallback %v after the fault, slowest return to shared %v after Redis answered",
			f.slowestSwitch.Round(time.Millisecond), f.slowestReturn.Round(time.Millisecond))
	}
	for _, s := range r.sums {
		t.Logf("  worker %d: attempts %d, sent %d, statuses %v, errors %v, max wait %v, stalls %d",
			s.ID, s.Attempts, s.Sent, s.Statuses, s.Errors, s.MaxWait.Round(time.Millisecond), len(s.Stalls))
	}
}
