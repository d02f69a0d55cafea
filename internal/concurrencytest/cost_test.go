package concurrencytest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestFleetActualCosts runs fleets under one rule of points that
// estimates a POST at 5 points and a GET at 1 (burst 5, the largest
// estimate), half their goroutines sending GETs and half POSTs, against a
// strict server that keeps a bucket of points the way Shopify's GraphQL
// API keeps one: it takes a request's requested cost when it arrives (5
// for a POST, 1 for a GET) and settles the difference from its actual cost
// when it has served it (a POST costs 1 to 5 points, 3 on average; a GET
// 1), and says the actual cost in its answer. (The estimates are upper
// bounds here, as Shopify's requested costs are, so that the run without
// correction is the do-nothing baseline; charges are tested on the stores
// and the Transport.) The corrected fleet reads it (Rule.ActualCost): a
// charge lands in the shared bucket at once, a refund in a bucket with a
// queue becomes the bucket's credit, which the next request that would
// queue takes at once (internal/localstore's credit.go).
//
// The cells cross the space: fleet shapes (4 processes × 8 goroutines, one
// process × 32 without Redis, one busy process beside three nearly idle
// ones), the rule's burst (one, two and ten of the largest cost; the
// server's bucket twice that) and the rate (20, 100 and 1000 points/s). A
// server bucket of the burst itself is left out: with no margin at all,
// the fleet without correction already meets rejections (10 in one run).
//
// Gates, per cell: no request rejected, in either run; the corrected
// fleet uses more of the points than the fleet that books its estimates
// only, by minGain at least; and where the burst is ten costs or more, at
// least 0.95 of them (issue 12's target). With a burst of one cost the
// credit lapses within a few intervals, as the server's bucket refills, so
// refunds that come while every worker waits in the queue are lost; the
// target is logged there (docs/CONCURRENCY.md, "Credits").
func TestFleetActualCosts(t *testing.T) {
	const (
		run    = 5 * time.Second
		settle = time.Second
		// minGain is the least gain in points used that the credits must
		// bring. Measured under the race detector (three runs of each
		// cell, 2026-12-07), the smallest was 0.086 (a busy process beside
		// three idle ones: 0.726 against 0.640); no credits at all gain
		// nothing (one run: 0.652 against 0.641).
		minGain = 0.05
	)
	type shape struct {
		procs, goroutines int
		idle              int // nearly idle processes beside, one goroutine each
	}
	for _, cell := range []struct {
		name         string
		limit, burst int
		capacity     int
		shape        shape
		local        bool // one process, no Redis
	}{
		{"4x8_100pts_b5_cap10", 100, 5, 10, shape{4, 8, 0}, false},
		{"1x32_local_100pts_b5_cap10", 100, 5, 10, shape{1, 32, 0}, true},
		{"busy+3idle_100pts_b5_cap10", 100, 5, 10, shape{1, 16, 3}, false},
		{"4x8_100pts_b50_cap100", 100, 50, 100, shape{4, 8, 0}, false},
		{"4x8_1000pts_b50_cap100", 1000, 50, 100, shape{4, 8, 0}, false},
		{"4x8_20pts_b10_cap20", 20, 10, 20, shape{4, 8, 0}, false},
	} {
		t.Run(cell.name, func(t *testing.T) {
			used := map[bool]float64{}
			for _, correct := range []bool{false, true} {
				name := map[bool]string{false: "estimates only", true: "corrected"}[correct]
				var rs *redistest.Server
				if !cell.local {
					rs = redistest.Start(t)
				}
				srv := fleettest.NewServer(t, fleettest.WithPoints(cell.limit, time.Second, cell.capacity, func(r *http.Request, seq int) fleettest.PointsCost {
					if r.Method == http.MethodPost {
						return fleettest.PointsCost{Requested: 5, Actual: 1 + seq%5}
					}
					return fleettest.PointsCost{Actual: 1}
				}))
				rule := fleettest.RuleConfig{Name: "points", Rate: cell.limit, Period: time.Second, Burst: cell.burst, MethodCosts: map[string]int{http.MethodPost: 5}}
				if correct {
					rule.ActualCostHeader = fleettest.CostHeader
				}
				cfg := fleettest.WorkerConfig{
					URL:         srv.URL + "/api",
					Namespace:   strings.ReplaceAll(t.Name(), "/", "-") + name[:1],
					Rules:       []fleettest.RuleConfig{rule},
					Goroutines:  cell.shape.goroutines,
					Methods:     []string{http.MethodGet, http.MethodPost},
					Duration:    run,
					MaxAttempts: 1,
				}
				if rs != nil {
					cfg.RedisAddrs = []string{rs.Addr()}
				}
				var cfgs []fleettest.WorkerConfig
				for range cell.shape.procs {
					cfgs = append(cfgs, cfg)
				}
				idle := cfg
				idle.Goroutines, idle.Interval, idle.Methods = 1, 500*time.Millisecond, []string{http.MethodPost}
				for range cell.shape.idle {
					cfgs = append(cfgs, idle)
				}
				res := fleettest.Run(t, cfgs...)
				tot := fleettest.Totals(res.Summaries)
				s := srv.Offset(res.Start)
				span := run - settle - capSettle
				used[correct] = float64(srv.Points(s+settle, s+run-capSettle)) / (float64(cell.limit) * span.Seconds())
				rejected := tot.Statuses[http.StatusTooManyRequests]
				t.Logf("%s: sent %d, 429 %d, points used %.3f of the quota (issue 12's target: 0.95)", name, tot.Sent, rejected, used[correct])
				if rejected != 0 {
					t.Errorf("%s: %d requests rejected, want 0", name, rejected)
				}
				checkFailures(t, tot, cell.shape.procs*cell.shape.goroutines+cell.shape.idle)
			}
			if used[true] < used[false]+minGain {
				t.Errorf("corrected, the fleet used %.3f of the points, against %.3f without correction: want a gain of at least %.2f", used[true], used[false], minGain)
			}
			if cell.burst >= 10*5 && used[true] < 0.95 {
				t.Errorf("corrected, with a burst of ten costs or more, the fleet used %.3f of the points, want ≥ 0.95 (issue 12)", used[true])
			}
		})
	}
}
