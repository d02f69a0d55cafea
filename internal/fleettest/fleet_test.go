package fleettest_test

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// The shared bucket of issue 3: 100/s, burst 5, for 10 s.
const (
	fleetRate     = 100
	fleetBurst    = 5
	fleetDuration = 10 * time.Second
	fleetWorkers  = 4

	// defaultHeadroom is the Transport's headroom when its worker config
	// sets none, as throttle.WithHeadroom documents it.
	defaultHeadroom = 0.02
)

// fleetConfig returns a worker config sharing one bucket in rs, under a
// namespace of the test's own.
func fleetConfig(t *testing.T, rs *redistest.Server, srv *fleettest.Server) fleettest.WorkerConfig {
	return fleettest.WorkerConfig{
		URL:        srv.URL + "/api",
		RedisAddrs: []string{rs.Addr()},
		Namespace:  regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"),
		Rules:      []fleettest.RuleConfig{{Name: "api", Rate: fleetRate, Period: time.Second, Burst: fleetBurst}},
		Duration:   fleetDuration,
		// Kept to tell a stalled worker from a stalled server when a
		// window is too busy.
		RecordDepartures: true,
	}
}

// TestFleetSharesOneBucket: four processes of eight goroutines each share
// one Redis bucket and together keep one process's quota, using nearly all
// of it.
func TestFleetSharesOneBucket(t *testing.T) {
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t)
	cfg := fleetConfig(t, rs, srv)
	cfg.Goroutines = 8
	cfgs := make([]fleettest.WorkerConfig, fleetWorkers)
	for i := range cfgs {
		cfgs[i] = cfg
	}
	stalls := fleettest.WatchStalls(t)
	res := fleettest.Run(t, cfgs...)
	checkSharedBucket(t, srv, res, stalls())
}

// TestFleetSharesOneBucketUnevenLoad: one busy process and three nearly
// idle ones (one request every 500 ms) still use nearly all of the quota:
// the idle ones do not hold slots they do not use.
func TestFleetSharesOneBucketUnevenLoad(t *testing.T) {
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t)
	busy := fleetConfig(t, rs, srv)
	busy.Goroutines = 8
	idle := fleetConfig(t, rs, srv)
	idle.Goroutines = 1
	idle.Interval = 500 * time.Millisecond
	stalls := fleettest.WatchStalls(t)
	res := fleettest.Run(t, busy, idle, idle, idle)
	checkSharedBucket(t, srv, res, stalls())

	// Nobody starves: each idle process got nearly all of its twenty
	// requests through the busy one's queue.
	arrivals := srv.Arrivals()
	for id := 1; id < fleetWorkers; id++ {
		if n := len(arrivals.FromWorker(id)); n < 15 {
			t.Errorf("idle worker %d: %d requests arrived, want about %v", id, n, fleetDuration/idle.Interval)
		}
	}
}

// checkSharedBucket checks a run of the shared 100/s, burst 5 bucket
// against the server's record.
//
// Every worker runs with the default headroom (2 %, see
// throttle.WithHeadroom), as users do, so the bucket's effective rate is
// 98/s. The ideal is what a perfect GCRA
// bucket of that rate admits between the first and the last arrival:
//
//	ideal = burst + 98/s · (last arrival − first arrival)
//
// which is the most any sequence of conforming departures spanning that
// interval can hold. The run must reach 97 % of it, and never exceed the
// quota itself (100 + 5) in any 1 s sliding window at the server.
//
// Except for what the machine does: a process the OS does not run for S
// sends all the requests whose slots fell in S at once when it runs again,
// up to S/interval more in a window than the limiter scheduled. On a
// two-core machine shared with parallel builds (load averages above 10
// were seen) stalls of 50-250 ms happen. So the busiest window may exceed
// 105 by the slots of the stalls the watchers measured around it (the
// workers' and this process's, where the server runs), and no more. On a
// quiet machine no stall is measured and the bound is exactly 105; every
// run logs the figures.
func checkSharedBucket(t *testing.T, srv *fleettest.Server, res fleettest.Result, parentStalls []fleettest.Stall) {
	t.Helper()
	all := srv.Arrivals()
	arrivals := all.Fleet()
	times := arrivals.Times()
	total := fleettest.Totals(res.Summaries)
	start := srv.Offset(res.Start)

	for _, s := range res.Summaries {
		t.Logf("worker %d: attempts %d, sent %d, statuses %v, errors %v, max wait %v",
			s.ID, s.Attempts, s.Sent, s.Statuses, s.Errors, s.MaxWait.Round(time.Millisecond))
		if n := unexpectedErrors(s); n > 0 {
			t.Errorf("worker %d: %d unexpected errors %v: %q", s.ID, n, s.Errors, s.Samples)
		}
	}
	if len(all) != len(arrivals) {
		t.Errorf("%d requests came from outside the fleet", len(all)-len(arrivals))
	}
	if n := len(arrivals.Status(http.StatusOK)); n != len(arrivals) {
		t.Errorf("%d of %d requests were not answered 200", len(arrivals)-n, len(arrivals))
	}
	if len(arrivals) != total.Sent {
		t.Errorf("server saw %d requests, workers sent %d", len(arrivals), total.Sent)
	}

	first, last, ok := fleettest.Span(times)
	if !ok {
		t.Fatal("no request arrived")
	}
	maxN, win := fleettest.MaxInWindow(times, time.Second)
	effRate := fleetRate * (1 - defaultHeadroom)
	ideal := fleetBurst + effRate*(last-first).Seconds()
	share := float64(len(times)) / ideal
	t.Logf("arrivals %d from %v to %v after the start (span %v); per second %v",
		len(times), (first - start).Round(time.Millisecond), (last - start).Round(time.Millisecond),
		(last - first).Round(time.Millisecond), fleettest.PerSecond(times, start))
	t.Logf("max in a 1 s window: %d (window from %v); ideal %.1f; got %.2f %% of it (%.2f %% of %d = 100/s·10 s + 5 without headroom)",
		maxN, (win.From - start).Round(time.Millisecond), ideal, 100*share,
		100*float64(len(times))/(fleetRate*fleetDuration.Seconds()+fleetBurst), int(fleetRate*fleetDuration.Seconds()+fleetBurst))

	deps := fleettest.Departures(res.Summaries, srv.Epoch())
	depN, depWin := fleettest.MaxInWindow(deps, time.Second)
	t.Logf("departures (workers' clocks): max in a 1 s window %d (from %v)", depN, (depWin.From - start).Round(time.Millisecond))
	stalled := fleettest.StallTime(append(fleettest.Stalls(res.Summaries), parentStalls...), srv.Epoch(), win)
	interval := time.Duration(float64(time.Second) / effRate)
	allowance := int((stalled + interval - 1) / interval)
	t.Logf("stalls measured around that window: %v in all, worth %d slots", stalled.Round(time.Millisecond), allowance)
	if maxN > fleetRate+fleetBurst+allowance {
		t.Errorf("%d arrivals in the 1 s window from %v: above the quota %d + %d (+ %d for %v of measured stalls)",
			maxN, win.From-start, fleetRate, fleetBurst, allowance, stalled)
		logWindow(t, arrivals, win, start)
		logGaps(t, "departures", deps, win, start)
	}
	if share < 0.97 {
		t.Errorf("%d arrivals, %.2f %% of the ideal %.1f: want ≥ 97 %%", len(times), 100*share, ideal)
	}
	// The ideal is measured over the arrivals' own span, so also check
	// that span covers the run: a fleet that stopped early would
	// otherwise pass.
	if first-start > time.Second || start+fleetDuration-last > time.Second {
		t.Errorf("arrivals span [%v, %v] after the start: the run lasted %v", first-start, last-start, fleetDuration)
	}
}

// logWindow logs what made a window too busy: its arrivals per worker and
// the long gaps around it, which show a stalled process or server.
func logWindow(t *testing.T, arrivals fleettest.Arrivals, win fleettest.Window, start time.Duration) {
	t.Helper()
	in := arrivals.Filter(func(a fleettest.Arrival) bool { return a.At >= win.From && a.At < win.To })
	per := map[int]int{}
	for _, a := range in {
		per[a.Worker]++
	}
	t.Logf("window [%v, %v): %d arrivals, per worker %v", win.From-start, win.To-start, len(in), per)
	logGaps(t, "arrivals", arrivals.Times(), win, start)
}

// logGaps logs the long gaps and the bunches of times near win.
func logGaps(t *testing.T, what string, times []time.Duration, win fleettest.Window, start time.Duration) {
	t.Helper()
	var near []time.Duration
	for _, x := range times {
		if x >= win.From-time.Second && x < win.To+time.Second {
			near = append(near, x)
		}
	}
	for i := 1; i < len(near); i++ {
		if gap := near[i] - near[i-1]; gap > 25*time.Millisecond {
			t.Logf("%s: gap of %v before %v", what, gap.Round(time.Millisecond), (near[i] - start).Round(time.Millisecond))
		}
	}
	for i := 0; i+10 < len(near); i++ {
		if d := near[i+10] - near[i]; d < 50*time.Millisecond {
			t.Logf("%s: 11 within %v from %v", what, d.Round(time.Millisecond), (near[i] - start).Round(time.Millisecond))
			i += 10
		}
	}
}
