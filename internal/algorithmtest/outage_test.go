package algorithmtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// The run of TestFleetOutagePerAlgorithm: Redis dies 2.5 s into a run of
// 7.5 s and comes back 3 s later. The heartbeat's count is trusted from a
// replica's second beat, which rides on a reserve at least a second after
// the first; a window rule's goroutines call only as its windows open, so
// the second beat may come up to 2 s after the start: before it, the
// fallback assumes a fleet of store.DefaultFleetSize (a kill at 1.5 s
// measured 36/s through the outage, 4 × ⌊98/10⌋).
const (
	algoBeforeKill = 2500 * time.Millisecond
	algoOutage     = 3 * time.Second
	algoAfter      = 2 * time.Second
)

// TestFleetOutagePerAlgorithm: the window algorithms' fleet cells of
// TestFleetPerAlgorithm, with the fleet's Redis killed mid-run and
// restarted. In the outage each replica runs the rule's own algorithm on
// its quarter of the quota (internal/outage's window.go), so once the
// window the outage starts in has passed, the server (enforcing the same
// algorithm and quota) rejects nothing: the gate is no rejection from one
// second after the kill to the restart, no failed request, and a use of
// at least 0.90 of the quota in that span (the replicas keep ⌊98/4⌋ = 24
// each, 0.96). The switch's and the return's windows are logged: the
// fleet's count in the shared window is not known to the fallback, so a
// window the outage starts in may pass the quota (issue 11's switch).
func TestFleetOutagePerAlgorithm(t *testing.T) {
	cells := []algoCell{
		{"fixed", 0, fleettest.WithQuota(fleettest.Quota{Limit: algoRate, Window: time.Second, Kind: fleettest.FixedWindow, UnixAligned: true}), nil, windowStartRaceWhy, ""},
		{"sliding-log", 0, fleettest.WithQuota(fleettest.Quota{Limit: algoRate, Window: time.Second}), nil, slidingLogRaceWhy, slidingLogOutageWhy},
		{"sliding-counter", 0, fleettest.WithQuota(fleettest.Quota{Limit: algoRate, Window: time.Second, Kind: fleettest.SlidingCounter}), nil, windowStartRaceWhy, ""},
	}
	var rows []string
	for _, c := range cells {
		t.Run(c.algorithm, func(t *testing.T) { rows = append(rows, runAlgoOutageCell(t, c)) })
	}
	t.Logf("algorithm | sent | 429 in the switch's second | 429 after it, in the outage | 429 after the return | failed | use in the outage after its first second\n%s",
		strings.Join(rows, "\n"))
}

// slidingLogOutageWhy says why the sliding log's outage cell is logged, not
// gated (issue 13, open).
const slidingLogOutageWhy = "without the race detector 1-5 rejections in the outage in 2-3 runs of 10 (`go test -count=10 -run 'TestFleetOutagePerAlgorithm/sliding-log' ./internal/algorithmtest`, 2026-12-07), at 0.965-0.985 of the quota: a replica's arrivals held 26-27 in a trailing second, against its local log's 25 in 1.02 s, the extra ones, in the runs traced, waiters the queue had paced 10-60 ms past slots the log released together (likely the last of their three attempts, which leaves however late), and requests booked locally after a failed call to Redis, which leave half that call (25 ms) ahead of their slot (reporting the call as Queued did not help and was reverted, see docs/ALGORITHMS.md); leaving windowed buckets unpaced measured worse (10 runs of 10 failing, 0.60-0.83), for a cause not yet found"

func runAlgoOutageCell(t *testing.T, c algoCell) string {
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t, c.server)
	rule := fleettest.RuleConfig{Name: "api", Rate: algoRate, Period: time.Second, Algorithm: c.algorithm}
	cfgs := algoFleet(t, srv, rs, rule, algoWorkers, 8, algoBeforeKill+algoOutage+algoAfter, nil)
	cfg := cfgs[0]
	fleet := fleettest.Start(t, cfgs...)
	start := fleet.Go()
	time.Sleep(time.Until(start.Add(algoBeforeKill)))
	killed := time.Now()
	rs.Kill()
	time.Sleep(time.Until(killed.Add(algoOutage)))
	restarted := time.Now()
	rs.Restart()
	sums := fleet.Wait()
	tot := fleettest.Totals(sums)

	k, steady, r := srv.Offset(killed), srv.Offset(killed.Add(time.Second)), srv.Offset(restarted)
	rejected := srv.Arrivals().Status(http.StatusTooManyRequests)
	count := func(from, to time.Duration) int {
		return len(rejected.Filter(func(a fleettest.Arrival) bool { return a.At >= from && a.At < to }))
	}
	atSwitch, inOutage, after := count(k, steady), count(steady, r), count(r, srv.Offset(start.Add(cfg.Duration)))
	ok := srv.Arrivals().Status(http.StatusOK).Filter(func(a fleettest.Arrival) bool { return a.At >= steady && a.At < r })
	use := float64(len(ok)) / (algoRate * (r - steady).Seconds())
	failed, cut := failures(tot)
	gate, rejections := c.gate(t), c.gate(t)
	if c.knownWhy != "" {
		rejections = func(format string, args ...any) {
			t.Logf("known, not enforced: "+format+" ("+c.knownWhy+")", args...)
		}
	}
	if inOutage != 0 {
		rejections("%d requests rejected in the outage after its first second, want 0", inOutage)
	}
	for _, a := range rejected {
		t.Logf("rejected %v after the kill", a.At-k)
	}
	if failed != 0 || cut > algoWorkers*cfg.Goroutines {
		t.Errorf("%d requests failed, %d cut by the run's end: %v %v", failed, cut, tot.Errors, tot.Samples)
	}
	if use < 0.90 {
		gate("use %.3f of the quota in the outage after its first second, want ≥ 0.90", use)
	}
	t.Logf("arrivals per second from the start: %v", fleettest.PerSecond(srv.Arrivals().Fleet().Times(), srv.Offset(start)))
	return fmt.Sprintf("%s | %d | %d | %d | %d | %d | %.3f", c.algorithm, tot.Sent, atSwitch, inOutage, after, failed, use)
}
