package feedbacktest

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// fleetSpec is one shape of fleet: groups of identical worker processes,
// sharing one bucket through Redis or each with its own (local store).
type fleetSpec struct {
	name   string
	redis  bool
	groups []procGroup
}

// procGroup is n processes of goroutines each, paced by interval when it
// is positive (WorkerConfig.Interval).
type procGroup struct {
	n, goroutines int
	interval      time.Duration
}

// The fleets of the matrix. busy+7idle's idle processes send one request
// a second each: seven requests a second that must find room in the busy
// one's queue.
var (
	fleetLocal = fleetSpec{name: "1x32-local", groups: []procGroup{{n: 1, goroutines: 32}}}
	fleet4x8   = fleetSpec{name: "4x8", redis: true, groups: []procGroup{{n: 4, goroutines: 8}}}
	fleet8x16  = fleetSpec{name: "8x16", redis: true, groups: []procGroup{{n: 8, goroutines: 16}}}
	fleetIdle  = fleetSpec{name: "busy+7idle", redis: true, groups: []procGroup{{n: 1, goroutines: 16}, {n: 7, goroutines: 1, interval: time.Second}}}
	fleets     = []fleetSpec{fleetLocal, fleet4x8, fleet8x16, fleetIdle}
)

func (f fleetSpec) processes() int {
	n := 0
	for _, g := range f.groups {
		n += g.n
	}
	return n
}

// windowSpec is how the server counts: a sliding log or fixed windows of
// length.
type windowSpec struct {
	name   string
	kind   fleettest.WindowKind
	length time.Duration
}

var (
	sliding1s  = windowSpec{"sliding-1s", fleettest.SlidingLog, time.Second}
	sliding10s = windowSpec{"sliding-10s", fleettest.SlidingLog, 10 * time.Second}
	fixed1s    = windowSpec{"fixed-1s", fleettest.FixedWindow, time.Second}
	fixed60s   = windowSpec{"fixed-60s", fleettest.FixedWindow, time.Minute}
	windows    = []windowSpec{sliding1s, sliding10s, fixed1s, fixed60s}
)

// scenario is what happens around the fleet.
type scenario string

const (
	// steady: the fleet alone at the quota.
	steady scenario = "steady"
	// outside: an outside consumer takes outsideShare of the quota the
	// whole run (Server.StartOutside).
	outside scenario = "outside"
	// pause: the provider refuses everything for pauseLength in the
	// middle of the run (Server.Refuse), in the shape's own form.
	pause scenario = "pause"
)

var scenarios = []scenario{steady, outside, pause}

// outsideShare is the outside consumer's share of the quota.
const outsideShare = 0.30

// cell is one run of the matrix: a fleet against a server counting a
// window and wording its answers in a shape, in a scenario, with the rule
// equal to the quota (Rate: limit, Period: the window) and a burst.
type cell struct {
	fleet    fleetSpec
	window   windowSpec
	shape    fleettest.Shape
	scenario scenario
	rate     int // the quota per second: limit = rate × window
	burst    int
}

// limit is the quota over the cell's window.
func (c cell) limit() int { return c.rate * int(c.window.length/time.Second) }

// name is the cell's subtest name: fields joined by "_", so that
// -run 'TestMatrix/<name>' selects one cell (escape the "+" of
// busy+7idle: busy\+7idle).
func (c cell) name() string {
	n := fmt.Sprintf("%s_%s_%s_%s_b%d", c.fleet.name, c.window.name, c.shape.Name, c.scenario, c.burst)
	if c.rate != defaultRate {
		n += fmt.Sprintf("_%drps", c.rate)
	}
	return n
}

// offKey names the cell's do-nothing baseline: a transport without
// feedback reads no header (and MaxAttempts 1 retries nothing), so one off
// run serves every shape of a fleet, window, scenario, burst and rate.
func (c cell) offKey() string {
	n := fmt.Sprintf("%s_%s_%s_b%d", c.fleet.name, c.window.name, c.scenario, c.burst)
	if c.rate != defaultRate {
		n += fmt.Sprintf("_%drps", c.rate)
	}
	return n
}

// quotaLabel is the cell's quota as the table shows it: "200/1s".
func (c cell) quotaLabel() string {
	return fmt.Sprintf("%d/%ds", c.limit(), int(c.window.length/time.Second))
}

// timing is how long one fleet run lasts and where its pause lies.
type timing struct {
	run          time.Duration // the workers' Duration
	pauseFrom    time.Duration // from the start; pause cells only
	pauseLength  time.Duration
	settle       time.Duration // outside: the span the gates skip
	startOnWhole bool          // start on a whole Unix second
}

// Cell lengths before THROTTLE_MATRIX_SCALE: steady and outside cells run
// cellRun; a pause cell runs pauseBefore, the pause, then pauseAfter. The
// pause itself is not scaled: its length is the scenario.
const (
	cellRun     = 5 * time.Second
	pauseBefore = 2 * time.Second
	pauseLength = 3 * time.Second
	pauseAfter  = 3 * time.Second
)

func (c cell) timing(scale float64) timing {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	switch c.scenario {
	case pause:
		// The pause starts on a whole Unix second, so that every shape
		// can name its end exactly: Unix seconds rounded up or down and
		// Unix milliseconds then agree.
		from := sc(pauseBefore).Round(time.Second)
		return timing{run: from + pauseLength + sc(pauseAfter), pauseFrom: from, pauseLength: pauseLength, startOnWhole: true}
	case outside:
		// The gates start after the first window (the fleet has to learn
		// of the consumer), but leave at least half the cell.
		run := sc(cellRun)
		return timing{run: run, settle: min(c.window.length, run/2)}
	}
	return timing{run: sc(cellRun)}
}

// fleetRun is what one run of a cell's fleet left: the server's record,
// the workers' summaries and the stalls seen, with the run's bounds as
// offsets from the server's epoch.
type fleetRun struct {
	cell       cell
	off        bool
	timing     timing
	epoch      time.Time
	start, end time.Duration
	pause      fleettest.Window // zero unless a pause cell
	arrivals   fleettest.Arrivals
	sums       []fleettest.Summary
	stalls     []fleettest.Stall // the workers' and this process's
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// fleetRuns numbers the fleet runs through Redis, for their namespaces.
var fleetRuns atomic.Int64

// runFleet runs c's fleet once, with feedback or without (off), against a
// fresh server, under a Redis namespace of its own.
func runFleet(t *testing.T, rs *redistest.Server, c cell, off bool, scale float64) *fleetRun {
	t.Helper()
	tm := c.timing(scale)
	shape := c.shape
	if off {
		shape = fleettest.ShapeNone // read by nobody: see offKey
	}
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{
		Limit: c.limit(), Window: c.window.length, Kind: c.window.kind, Shape: shape,
	}))
	base := fleettest.WorkerConfig{
		URL:   srv.URL + "/api",
		Rules: []fleettest.RuleConfig{{Name: "api", Rate: c.limit(), Period: c.window.length, Burst: c.burst}},
		// Every rejection counts as it is: no retry hides one.
		MaxAttempts: 1,
		NoFeedback:  off,
		Duration:    tm.run,
	}
	if !off {
		base.Dialects = shape.Dialects
	}
	if c.fleet.redis {
		mode := "on"
		if off {
			mode = "off"
		}
		base.RedisAddrs = []string{rs.Addr()}
		// A namespace of its own for every run: a cell's second run in
		// its first's keys started under the first's cap and pause
		// (8x16 Stripe pause, 2026-12-05: 116/s in the rerun's first
		// second, before any rejection).
		base.Namespace = fmt.Sprintf("matrix-%s-%s-%d", nonName.ReplaceAllString(c.name(), "-"), mode, fleetRuns.Add(1))
	}
	var cfgs []fleettest.WorkerConfig
	for _, g := range c.fleet.groups {
		for range g.n {
			cfg := base
			cfg.Goroutines, cfg.Interval = g.goroutines, g.interval
			cfgs = append(cfgs, cfg)
		}
	}

	fleet := fleettest.Start(t, cfgs...)
	watch := fleettest.WatchStalls(t)
	startAt := time.Now().Add(fleettest.StartDelay)
	if tm.startOnWhole {
		startAt = nextWholeSecond(startAt)
	}
	r := &fleetRun{cell: c, off: off, timing: tm, epoch: srv.Epoch()}
	r.start = srv.Offset(startAt)
	r.end = r.start + tm.run
	if c.scenario == pause {
		r.pause = fleettest.Window{From: r.start + tm.pauseFrom, To: r.start + tm.pauseFrom + tm.pauseLength}
		srv.Refuse(r.pause)
	}
	fleet.GoAt(startAt)
	stopOutside := func() {}
	if c.scenario == outside {
		// Started with the fleet: both run the whole cell.
		time.Sleep(time.Until(startAt) - 10*time.Millisecond)
		stopOutside = srv.StartOutside(t, outsideShare*float64(c.rate))
	}
	r.sums = fleet.Wait()
	stopOutside()
	r.stalls = append(fleettest.Stalls(r.sums), watch()...)
	r.arrivals = srv.Arrivals()
	return r
}

// nextWholeSecond returns the first whole Unix second at or after t, with
// t's monotonic reading carried along.
func nextWholeSecond(t time.Time) time.Time {
	if ns := t.Nanosecond(); ns > 0 {
		return t.Add(time.Second - time.Duration(ns))
	}
	return t
}

// figures is what a run measured, for the gates and the table.
type figures struct {
	// used is the scenario's figure of use: the fleet's accepted requests
	// over the quota of the measured span (steady: the whole run; outside:
	// after the settle, less what the outside consumer was accepted;
	// pause: outside the pause).
	used float64
	// sent and rejected count the fleet's requests in the measured span
	// (pause: outside the pause); accepted those answered 200.
	sent, rejected, accepted int
	// quota is the measured span's quota (outside: what remains of it).
	quota float64
	// failed counts the calls that failed without a response, beyond the
	// run's end (errors every run ends with).
	failed int
	// Pause cells: told is the first fleet arrival in the pause (the
	// request whose rejection tells the fleet), grace the time after it
	// in which requests already in flight may still arrive, inGrace the
	// arrivals from the pause's start to the grace's end, inPause those
	// after it until the pause's end (less endSlack), probeRate inPause
	// per second.
	told, grace     time.Duration
	inGrace         int
	inPause         int
	probeRate       float64
	outsideAccepted int
	outsideRate     float64       // outside cells: the consumer's sending rate
	stalled         time.Duration // stall time over the run, counting overlaps once
	// stallSlots is what the stalls can account for, in requests: the
	// stalled time at the quota's rate. A stalled worker's booked
	// requests wake late and book again, losing their slots; a stalled
	// server records the requests of its stall at once, packing a window
	// with more than the fleet sent in it.
	stallSlots int
	// tripped counts the workers whose Transport left the shared store
	// for its outage mode during the run: Redis, beside the fleet on the
	// same machine, did not answer within the outage call timeout. The
	// matrix measures feedback, not the outage mode: such a run is not
	// the cell's (see runCell).
	tripped int
	flights fleettest.Flights
}

// Pause tolerances.
//
// graceFixed is added to twice the fleet's p99 round trip: a rejection
// tells its worker within one round trip, the worker's pause lands in
// the store within one more (a Redis call on loopback costs about an HTTP
// one; the local store, nothing), and a request already under way when it
// lands arrives within a one-way trip; 20 ms covers the two processes'
// scheduling delays shorter than the stall watchers' threshold (10 ms
// each), which no watcher reports. Stalls the watchers did measure in that
// time are added too.
//
// endSlack is how long before the pause's end an arrival counts as the
// end: a waiter departs up to half a store round trip early by design
// (Transport.acquire counts its wait from when the store decided), and
// Redis's wall clock and this process's monotonic clock drift apart by
// milliseconds under load (the same allowance as TestFleetPausesOn429's).
const (
	graceFixed = 20 * time.Millisecond
	endSlack   = 25 * time.Millisecond
)

// measure works out the figures of a run.
func measure(r *fleetRun) figures {
	c := r.cell
	var f figures
	fl := r.arrivals.Fleet()
	f.flights = fleettest.Totals(r.sums).Flights
	for _, s := range r.sums {
		f.failed += s.ErrorCount() - s.Errors[fleettest.ErrKindBeyondDeadline] - s.Errors[fleettest.ErrKindContext]
		if len(s.ModeChanges) > 0 {
			f.tripped++
		}
	}
	f.stalled = fleettest.StallTime(r.stalls, r.epoch, fleettest.Window{From: r.start, To: r.end})
	f.stallSlots = int(math.Ceil(f.stalled.Seconds() * float64(c.rate)))
	count := func(as fleettest.Arrivals, keep func(fleettest.Arrival) bool) (sent, accepted int) {
		for _, a := range as {
			if keep(a) {
				sent++
				if a.Status == http.StatusOK {
					accepted++
				}
			}
		}
		return sent, accepted
	}
	// Requests depart before the run's end; they may arrive after it.
	inRun := func(from time.Duration) func(fleettest.Arrival) bool {
		return func(a fleettest.Arrival) bool { return a.At >= from }
	}
	perSec := float64(c.rate)
	switch c.scenario {
	case steady:
		f.sent, f.accepted = count(fl, inRun(r.start))
		f.quota = perSec * (r.end - r.start).Seconds()
	case outside:
		from := r.start + r.timing.settle
		f.sent, f.accepted = count(fl, inRun(from))
		out := r.arrivals.FromWorker(fleettest.OutsideWorker)
		outSent, outAccepted := count(out, func(a fleettest.Arrival) bool { return a.At >= from && a.At < r.end })
		f.outsideAccepted = outAccepted
		f.outsideRate = float64(outSent) / (r.end - from).Seconds()
		f.quota = perSec*(r.end-from).Seconds() - float64(outAccepted)
	case pause:
		p := r.pause
		f.sent, f.accepted = count(fl, func(a fleettest.Arrival) bool { return a.At >= r.start && (a.At < p.From || a.At >= p.To) })
		f.quota = perSec * ((r.end - r.start) - p.Len()).Seconds()
		f.told = p.Len()
		if first, ok := fleettest.FirstIn(fl.Times(), p.From, p.To); ok {
			f.told = first - p.From
		}
		told := p.From + f.told
		horizon := 2*f.flights.P99 + graceFixed
		f.grace = horizon + fleettest.StallTime(r.stalls, r.epoch, fleettest.Window{From: told, To: told + horizon})
		f.inGrace = fleettest.CountIn(fl.Times(), p.From, told+f.grace)
		checkTo := p.To - endSlack
		f.inPause = fleettest.CountIn(fl.Times(), told+f.grace, checkTo)
		if span := checkTo - (told + f.grace); span > 0 {
			f.probeRate = float64(f.inPause) / span.Seconds()
		}
	}
	f.rejected = f.sent - f.accepted
	if f.quota > 0 {
		f.used = float64(f.accepted) / f.quota
	}
	return f
}

// logRun logs what a run did, second by second and worker by worker.
func logRun(t *testing.T, r *fleetRun, f figures) {
	t.Helper()
	mode := "feedback on"
	if r.off {
		mode = "feedback off (WithoutFeedback)"
	}
	fl := r.arrivals.Fleet()
	seconds := int((r.end - r.start + time.Second - 1) / time.Second)
	perSec := func(as fleettest.Arrivals) []int {
		ps := fleettest.PerSecond(as.Times(), r.start)
		return ps[:min(len(ps), seconds)]
	}
	t.Logf("%s, %s: fleet sent/s %v", r.cell.name(), mode, perSec(fl))
	t.Logf("  accepted/s %v, rejected/s %v", perSec(fl.Status(http.StatusOK)), perSec(fl.Filter(func(a fleettest.Arrival) bool { return a.Status != http.StatusOK })))
	if r.cell.scenario == outside {
		out := r.arrivals.FromWorker(fleettest.OutsideWorker)
		t.Logf("  outside sent/s %v, accepted/s %v", perSec(out), perSec(out.Status(http.StatusOK)))
	}
	if r.cell.scenario == pause {
		t.Logf("  pause [%v, %v) from the start: first fleet arrival in it %v after its start, grace %v, %d arrivals in [start, grace), %d after (%.1f/s)",
			r.pause.From-r.start, r.pause.To-r.start, f.told.Round(time.Millisecond), f.grace.Round(time.Millisecond),
			f.inGrace, f.inPause, f.probeRate)
		told := r.pause.From + f.told
		var late []string
		for _, a := range fl.Filter(func(a fleettest.Arrival) bool { return a.At >= told+f.grace && a.At < r.pause.To-endSlack }) {
			if len(late) == 12 {
				late = append(late, "…")
				break
			}
			late = append(late, fmt.Sprintf("w%d +%v", a.Worker, (a.At-told).Round(time.Millisecond)))
		}
		if len(late) > 0 {
			t.Logf("  after the grace (worker, time after the first rejection): %s", strings.Join(late, ", "))
		}
	}
	t.Logf("  accepted %d of %d sent, quota %.0f: use %.3f; failed %d; round trips p50 %v p99 %v max %v; stalls %v (worth %d requests)",
		f.accepted, f.sent, f.quota, f.used, f.failed, f.flights.P50.Round(10*time.Microsecond), f.flights.P99.Round(10*time.Microsecond),
		f.flights.Max.Round(10*time.Microsecond), f.stalled.Round(time.Millisecond), f.stallSlots)
	for _, s := range r.sums {
		t.Logf("  worker %d: attempts %d, sent %d, statuses %v, errors %v, max wait %v, stalls %d",
			s.ID, s.Attempts, s.Sent, s.Statuses, s.Errors, s.MaxWait.Round(time.Millisecond), len(s.Stalls))
		if len(s.Samples) > 0 {
			t.Logf("    error samples: %q", s.Samples)
		}
		for _, c := range s.ModeChanges {
			t.Logf("    mode %s → %s at +%v %s", c.From, c.To, (c.At.Sub(r.epoch) - r.start).Round(time.Millisecond), c.Err)
		}
	}
}
