package concurrencytest

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestFleetPriorities: three processes of 8 goroutines each keep a cap of
// 2 (50 ms a request) saturated with low-priority requests; a fourth sends
// high-priority ones, 10 a second, a quarter of what the cap serves. A
// waiting ticket is served by priority across the fleet, so a high request
// waits only for the next lease to come free (at most one service time),
// while the low ones queue: the high requests' p99 wait must be at most a
// tenth of the low ones'. And aging bounds the low ones' wait: no low
// request may wait longer than the first-come-first-served wait of the
// whole fleet's queue plus two aging steps (lease.DefaultAging each, the
// bound docs/CONCURRENCY.md gives).
func TestFleetPriorities(t *testing.T) {
	const (
		limit   = 2
		service = 50 * time.Millisecond
		run     = 5 * time.Second
	)
	rs := redistest.Start(t)
	srv := fleettest.NewServer(t, fleettest.WithConcurrency(limit, service))
	low := workerConfig(t, srv, rs, limit, run)
	low.Priority = "low"
	high := low
	high.Priority, high.Goroutines, high.Interval = "high", 2, 200*time.Millisecond
	res := fleettest.Run(t, low, low, low, high)
	lows := res.Summaries[:3]
	lowTot, highSum := fleettest.Totals(lows), res.Summaries[3]
	lowP99 := maxP99(lows)
	t.Logf("low: sent %d, wait p50 %v p99 %v max %v; high: sent %d, wait p50 %v p99 %v max %v",
		lowTot.Sent, lows[0].Waits.P50, lowP99, lowTot.MaxWait, highSum.Sent, highSum.Waits.P50, highSum.Waits.P99, highSum.MaxWait)
	if n := fleettest.Totals(res.Summaries).Statuses[http.StatusTooManyRequests]; n != 0 {
		t.Errorf("%d requests rejected, want 0", n)
	}
	if highSum.Sent < int(run/high.Interval)*high.Goroutines*8/10 {
		t.Errorf("high sent %d, want about %d", highSum.Sent, int(run/high.Interval)*high.Goroutines)
	}
	if highSum.Waits.P99*10 > lowP99 {
		t.Errorf("high p99 wait %v, more than a tenth of low's %v", highSum.Waits.P99, lowP99)
	}
	fifo := time.Duration(3*low.Goroutines+high.Goroutines) * service / limit
	if bound := fifo + 2*lease.DefaultAging; lowTot.MaxWait > bound {
		t.Errorf("a low request waited %v, beyond the aging bound %v", lowTot.MaxWait, bound)
	}
	checkFailures(t, fleettest.Totals(res.Summaries), 3*low.Goroutines+high.Goroutines)
}

// maxP99 returns the highest p99 wait of sums.
func maxP99(sums []fleettest.Summary) time.Duration {
	var d time.Duration
	for _, s := range sums {
		d = max(d, s.Waits.P99)
	}
	return d
}
