package faulttest_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/faulttest"
	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// The run of TestFleetSurvivesRedisKill: a rule of 100/s, burst 8, shared
// by four processes of three goroutines each; Redis dies after 2.5 s and
// comes back 4 s later; the run ends 3 s after that.
const (
	outageRate    = 100
	outageBurst   = 8
	outageWorkers = 4
	outageGorout  = 3
	beforeKill    = 2500 * time.Millisecond
	outageFor     = 4 * time.Second
	afterRestart  = 3 * time.Second

	// What the issue asks.
	maxSwitch     = 250 * time.Millisecond
	maxReturn     = 2 * time.Second
	maxOutageRate = 1.10 * outageRate
	// After the restart, in every 1 s window (the replicas return one by
	// one; see returnGrace in the throttle package): also 110 % of the
	// rule, which leaves room for the rule's burst of 8.
	maxReturnWindow = 110
)

// TestFleetSurvivesRedisKill kills the fleet's Redis mid-run and restarts
// it with an empty memory and script cache. No request may fail because of
// Redis; every worker must switch to its local fallback within 250 ms of
// the kill; the fleet's rate during the outage must stay within 110 % of
// the rule; every worker must be back on the shared bucket within 2 s of
// the restart; and while they return, one by one, no 1 s window may hold
// more than 110 % of the rule (plus the slots of any stall measured in
// it).
//
// The outage's budget: the fleet spends the rule's rate (less the default
// 2 % headroom) at one quarter per worker, plus each worker's local burst
// (floor(8/4) = 2) and the slots booked in Redis before the kill that
// depart after it (at most one per goroutine, 12): about 392 + 20 over 4 s,
// 103 % of the rule.
func TestFleetSurvivesRedisKill(t *testing.T) {
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t)
	dir := t.TempDir()
	cfgs := make([]fleettest.WorkerConfig, outageWorkers)
	logs := make([]string, outageWorkers)
	for i := range cfgs {
		logs[i] = filepath.Join(dir, fmt.Sprintf("modes-%d.jsonl", i))
		cfgs[i] = fleettest.WorkerConfig{
			URL:        srv.URL + "/api",
			RedisAddrs: []string{rs.Addr()},
			Namespace:  regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"),
			Rules:      []fleettest.RuleConfig{{Name: "api", Rate: outageRate, Period: time.Second, Burst: outageBurst}},
			Goroutines: outageGorout,
			Duration:   beforeKill + outageFor + afterRestart,
			// The defaults are what is tested: ModeFallback and
			// the 50 ms Redis timeout; only the log is extra.
			Extra: map[string]string{faulttest.ExtraModeLog: logs[i]},
		}
	}
	stalls := fleettest.WatchStalls(t)
	fleet := fleettest.Start(t, cfgs...)
	start := fleet.Go()

	time.Sleep(time.Until(start.Add(beforeKill)))
	killed := time.Now()
	rs.Kill()
	time.Sleep(time.Until(killed.Add(outageFor)))
	restartCalled := time.Now()
	rs.Restart() // returns once the new process answers
	restarted := time.Now()
	sums := fleet.Wait()
	t.Logf("Redis killed %v after the start, restart called %v later, answering %v after that",
		killed.Sub(start).Round(time.Millisecond), restartCalled.Sub(killed).Round(time.Millisecond),
		restarted.Sub(restartCalled).Round(time.Millisecond))

	// No request failed because of Redis: the only errors allowed are
	// those of any run's end (a slot beyond the run's deadline).
	tot := fleettest.Totals(sums)
	for kind, n := range tot.Errors {
		if kind != fleettest.ErrKindBeyondDeadline && kind != fleettest.ErrKindContext {
			t.Errorf("%d requests failed with %s; samples %q", n, kind, tot.Samples)
		}
	}
	for code, n := range tot.Statuses {
		if code != 200 {
			t.Errorf("%d responses with status %d", n, code)
		}
	}
	t.Logf("fleet: %d attempts, %d sent, statuses %v, errors %v", tot.Attempts, tot.Sent, tot.Statuses, tot.Errors)

	// The switch and the return, as each worker's mode log tells them.
	var slowestSwitch, slowestReturn time.Duration
	for i, path := range logs {
		recs, err := faulttest.ReadModeLog(path)
		if err != nil {
			t.Fatal(err)
		}
		sw, back, err := switchAndReturn(recs, killed, restarted)
		if err != nil {
			t.Errorf("worker %d: %v; log:\n%s\nstderr tail:\n%s", i, err, formatLog(recs, killed), tail(fleet.Stderr(i), 2000))
			continue
		}
		t.Logf("worker %d: fallback %v after the kill, shared %v after the restart (%d changes)", i,
			sw.Round(time.Millisecond), back.Round(time.Millisecond), len(recs))
		slowestSwitch, slowestReturn = max(slowestSwitch, sw), max(slowestReturn, back)
	}
	if slowestSwitch > maxSwitch {
		t.Errorf("slowest switch to fallback %v after the kill, want ≤ %v", slowestSwitch, maxSwitch)
	}
	if slowestReturn > maxReturn {
		t.Errorf("slowest return to the shared bucket %v after the restart, want ≤ %v", slowestReturn, maxReturn)
	}

	// The fleet's rate while Redis was down, at the server.
	times := srv.Arrivals().Fleet().Times()
	from, to := srv.Offset(killed), srv.Offset(restartCalled)
	n := fleettest.CountIn(times, from, to)
	rate := float64(n) / (to - from).Seconds()
	t.Logf("outage %v: %d arrivals, %.1f/s = %.1f %% of the rule (limit %.0f %%)",
		(to - from).Round(time.Millisecond), n, rate, 100*rate/outageRate, 100*maxOutageRate/outageRate)
	if rate > maxOutageRate {
		win := fleettest.Window{From: from, To: to}
		t.Errorf("rate during the outage %.1f/s, want ≤ %.0f/s (stalls in the window: test process %v, workers %v)",
			rate, maxOutageRate, fleettest.StallTime(stalls(), srv.Epoch(), win),
			fleettest.StallTime(fleettest.Stalls(sums), srv.Epoch(), win))
	}
	// The return: the 1 s window of the 3 s after the restart with the most
	// arrivals. A stall of a process (this one or a worker) sends its
	// delayed requests together; the slots the stalls in that window
	// account for are allowed on top.
	end := srv.Offset(start.Add(cfgs[0].Duration))
	var back []time.Duration
	for _, x := range times {
		if x >= srv.Offset(restarted) && x < end {
			back = append(back, x)
		}
	}
	busiest, win := fleettest.MaxInWindow(back, time.Second)
	stalled := fleettest.StallTime(append(fleettest.Stalls(sums), stalls()...), srv.Epoch(), win)
	interval := time.Second / outageRate
	allowance := int((stalled + interval - 1) / interval)
	t.Logf("after the restart: busiest 1 s window %d arrivals, from %v after the restart (limit %d; stalls in it %v, worth %d slots)",
		busiest, (win.From - srv.Offset(restarted)).Round(time.Millisecond), maxReturnWindow,
		stalled.Round(time.Millisecond), allowance)
	if busiest > maxReturnWindow+allowance {
		t.Errorf("%d arrivals in the 1 s window from %v after the restart, want ≤ %d (+ %d for stalls)",
			busiest, (win.From - srv.Offset(restarted)).Round(time.Millisecond), maxReturnWindow, allowance)
	}
	t.Logf("arrivals per second from the start: %v", fleettest.PerSecond(times, srv.Offset(start)))
	before := fleettest.RateIn(times, srv.Offset(start), from)
	after := fleettest.RateIn(times, srv.Offset(restarted), srv.Offset(start.Add(cfgs[0].Duration)))
	t.Logf("rate before the kill %.1f/s, after the restart %.1f/s", before, after)
}

// switchAndReturn finds, in one worker's mode log, the first change after
// the kill (which must be to fallback) and the first return to the shared
// bucket after the restart, as delays from each. Changes before the kill
// (a first call slower than the timeout on a loaded machine) are allowed
// if the worker was back on the shared bucket at the kill.
func switchAndReturn(recs []faulttest.ModeRecord, killed, restarted time.Time) (sw, back time.Duration, err error) {
	shared := throttle.ModeShared.String()
	i := 0
	for ; i < len(recs) && recs[i].At.Before(killed); i++ {
	}
	if i > 0 && recs[i-1].To != shared {
		return 0, 0, fmt.Errorf("in mode %s at the kill", recs[i-1].To)
	}
	if i == len(recs) {
		return 0, 0, fmt.Errorf("no change after the kill")
	}
	if to := recs[i].To; to != throttle.ModeFallback.String() {
		return 0, 0, fmt.Errorf("first change after the kill is to %s, want fallback", to)
	}
	sw = recs[i].At.Sub(killed)
	for ; i < len(recs); i++ {
		r := recs[i]
		if r.To == shared && r.At.Before(restarted) {
			return 0, 0, fmt.Errorf("back to shared at %v, before Redis answered again", r.At.Sub(killed))
		}
		if r.To == shared {
			return sw, r.At.Sub(restarted), nil
		}
	}
	return 0, 0, fmt.Errorf("never back on the shared bucket after the restart")
}

func formatLog(recs []faulttest.ModeRecord, killed time.Time) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %+v: %s → %s %s\n", r.At.Sub(killed).Round(time.Millisecond), r.From, r.To, r.Err)
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
