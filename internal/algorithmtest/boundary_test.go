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

// TestFleetWindowStartsBeforeABoundary: a fleet of a fixed-window or
// sliding-counter rule whose first requests all book in the last
// milliseconds of a Unix second, against a strict server of the same
// algorithm with its windows on the Unix second. A request booked there
// reaches the server after the boundary, which counts it in the next
// window: a fixed window's beside the quota the fleet books at that
// window's start, a sliding counter's at full weight while the rule's
// estimate has it in the old window at a weight falling through the new
// one (its rejections come spread over that window). The stores book no
// request in the last guard of a window (store.Bucket.Edge) for it.
// Cells, per algorithm: the fleet starts 2, 8 or 15 ms before the
// boundary (within the guard of 20 ms at 100/s), at 100/s and at 20/s (a
// quota of 19 that the fleet's 32 goroutines spend at once), four
// processes × 8 goroutines, and one process × 32 goroutines. Every cell
// must see no rejection and no failed request, and use at least
// minBoundaryUse of the two whole windows after the boundary.
func TestFleetWindowStartsBeforeABoundary(t *testing.T) {
	type cell struct {
		algorithm                 string
		kind                      fleettest.WindowKind
		workers, goroutines, rate int
		before                    time.Duration
	}
	var cells []cell
	for _, alg := range []struct {
		name string
		kind fleettest.WindowKind
	}{{"fixed", fleettest.FixedWindow}, {"sliding-counter", fleettest.SlidingCounter}} {
		for _, rate := range []int{100, 20} {
			for _, before := range []time.Duration{2 * time.Millisecond, 8 * time.Millisecond, 15 * time.Millisecond} {
				cells = append(cells, cell{alg.name, alg.kind, algoWorkers, 8, rate, before})
			}
		}
		cells = append(cells, cell{alg.name, alg.kind, 1, 32, 100, 8 * time.Millisecond})
	}
	var rows []string
	for _, c := range cells {
		name := fmt.Sprintf("%s/%dx%d_%d-per-s_%v-before", c.algorithm, c.workers, c.goroutines, c.rate, c.before)
		t.Run(name, func(t *testing.T) {
			rs := redistest.Start(t)
			srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: c.rate, Window: time.Second, Kind: c.kind, UnixAligned: true}))
			rule := fleettest.RuleConfig{Name: "api", Rate: c.rate, Period: time.Second, Algorithm: c.algorithm}
			fleet := fleettest.Start(t, algoFleet(t, srv, rs, rule, c.workers, c.goroutines, 2500*time.Millisecond, nil)...)
			boundary := time.Now().Add(fleettest.StartDelay).Truncate(time.Second).Add(time.Second)
			start := fleet.GoAt(boundary.Add(-c.before))
			tot := fleettest.Totals(fleet.Wait())
			rejected := srv.Arrivals().Status(http.StatusTooManyRequests)
			b := srv.Offset(boundary)
			atBoundary := rejected.Filter(func(a fleettest.Arrival) bool { return a.At >= b && a.At < b+boundaryWatch })
			failed, cut := failures(tot)
			why := windowStartRaceWhy
			if c.kind == fleettest.SlidingCounter {
				why = "" // see windowStartRaceWhy
			}
			gate := algoCell{raceWhy: why}.gate(t)
			if len(rejected) != 0 {
				gate("%d requests rejected (%d within %v after the boundary), want 0", len(rejected), len(atBoundary), boundaryWatch)
			}
			for _, a := range rejected {
				t.Logf("rejected %v after the start, at %s past the Unix second", a.At-srv.Offset(start), time.Duration(srv.Epoch().Add(a.At).Nanosecond()))
			}
			t.Logf("arrivals per second from the boundary's second before it: %v", fleettest.PerSecond(srv.Arrivals().Fleet().Times(), b-time.Second))
			if failed != 0 || cut > c.workers*c.goroutines {
				t.Errorf("%d requests failed, %d cut by the run's end: %v %v", failed, cut, tot.Errors, tot.Samples)
			}
			ok := srv.Arrivals().Status(http.StatusOK).Filter(func(a fleettest.Arrival) bool {
				return a.At >= srv.Offset(boundary) && a.At < srv.Offset(boundary.Add(2*time.Second))
			})
			if use := float64(len(ok)) / float64(2*c.rate); use < minBoundaryUse {
				gate("the two whole windows after the boundary used %.3f of the quota, want at least %.2f", use, minBoundaryUse)
			}
			rows = append(rows, fmt.Sprintf("%s | %d | %d | %d | %d | %.3f", name, tot.Sent, len(atBoundary), len(rejected)-len(atBoundary), failed, float64(len(ok))/float64(2*c.rate)))
		})
	}
	t.Logf("cell | sent | 429 after the boundary | 429 elsewhere | failed | use of the two whole windows after the boundary\n%s", strings.Join(rows, "\n"))
}

// boundaryWatch is the span after the boundary whose rejections the rows
// count apart: those of requests booked before it and arriving after it
// (with the edge off, at 9-30 ms past it).
const boundaryWatch = 100 * time.Millisecond

// minBoundaryUse is the least use of the two windows after the boundary
// a cell passes with. What the algorithms allow there: a fixed window
// its quota less the headroom in each (⌊0.98·Rate⌋: 0.98 at 100/s, 0.95
// at 20/s); a sliding counter that quota in the first and, while the
// first's full weight slides out, one unit less in the second (0.965,
// 0.925). Measured, every cell at exactly those figures; the window
// waiters paced by the rule's interval (queue.go) sent 0.575-0.675 in the
// sliding counter's 20/s cells.
const minBoundaryUse = 0.9
