package algorithm_test

import (
	"strconv"
	"testing"

	"github.com/throttlekit/throttle/internal/algorithm"
)

// edgeCase is one request asked of a window with an Edge: the units
// already booked in the window before the one starting at start, in it
// and in the next, the floor asked, and the slot wanted.
type edgeCase struct {
	name              string
	prev, cur, next   int64
	floor, wantOffset int64 // from the window's start
}

// TestWindowEdge: a fixed window or a sliding counter with an Edge gives
// no slot in the last Edge of a window, whatever room it has: the request
// goes to the next window (the end of its first Edge, or later where that
// one is full or the previous window's weight leaves no room); nor in the
// first Edge, where it waits for the Edge's end. The Edge takes nothing
// else: a slot between the two edges is where it would be without one.
func TestWindowEdge(t *testing.T) {
	const p, edge = 1_000_000, 20_000 // 1 s windows, 20 ms edge (µs)
	algorithms := []struct {
		name  string
		w     algorithm.Window
		at    func(w algorithm.Window, c *algorithm.Counts, floor, hold, cost int64) int64
		cases []edgeCase
	}{
		{"fixed", algorithm.Window{Period: p, Quota: 3, Anchor: 250_000, Edge: edge}, algorithm.FixedAt, []edgeCase{
			{"mid-window, room", 0, 0, 0, 500_000, 500_000},
			{"just before the edge", 0, 0, 0, p - edge - 1, p - edge - 1},
			{"at the edge", 0, 0, 0, p - edge, p + edge},
			{"inside the edge", 0, 2, 0, p - 1, p + edge},
			{"inside the edge, next window full", 0, 0, 3, p - 5_000, 2*p + edge},
			{"at a window's start", 0, 0, 0, 0, edge},
			{"inside the first edge", 0, 2, 0, edge - 1, edge},
			{"at the first edge's end", 0, 2, 0, edge, edge},
			{"window full before the edge", 0, 3, 0, 100_000, p + edge},
		}},
		{"sliding counter", algorithm.Window{Period: p, Quota: 4, Edge: edge}, algorithm.CounterAt, []edgeCase{
			{"mid-window, room", 0, 0, 0, 500_000, 500_000},
			{"just before the edge", 0, 0, 0, p - edge - 1, p - edge - 1},
			{"at the edge", 0, 0, 0, p - edge, p + edge},
			// cur 3 of 4 weighs 3 at the next window's start: 3 + 1 ≤ 4.
			{"inside the edge", 0, 3, 0, p - 1, p + edge},
			{"inside the first edge", 0, 0, 0, edge / 2, edge},
			// prev 4 weighs 4·(1 − e) + 1 ≤ 4 from e = 1/4, after the
			// first edge whatever the floor.
			{"inside the first edge, weight in the way", 4, 0, 0, 1, p / 4},
			// cur 4: the next window waits for it to slide out to 3, a
			// quarter of the window in.
			{"inside the edge, window full", 0, 4, 0, p - 5_000, p + p/4},
			// prev 4 weighs 4·(1 − e) + 1 ≤ 4 from e = 1/4: before the edge.
			{"weight slides out before the edge", 4, 0, 0, 0, p / 4},
			// prev 4, cur 3: 4·(1 − e) + 4 ≤ 4 only at e = 1, inside the
			// edge, so the next window (prev 3 fits 3 + 1 once its first
			// edge is over).
			{"weight slides out only inside the edge", 4, 3, 0, 0, p + edge},
		}},
	}
	for _, a := range algorithms {
		start := 10*p + a.w.Anchor // a window's start
		for _, c := range a.cases {
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				var counts algorithm.Counts
				counts.Add(a.w, start-p, c.prev)
				counts.Add(a.w, start, c.cur)
				counts.Add(a.w, start+p, c.next)
				got := a.at(a.w, &counts, start+c.floor, 0, 1)
				if got != start+c.wantOffset {
					t.Errorf("slot for floor %+d µs from the window's start = %+d, want %+d", c.floor, got-start, c.wantOffset)
				}
				noEdge := a.w
				noEdge.Edge = 0
				if without := a.at(noEdge, &counts, start+c.floor, 0, 1); without >= start+edge && got < start+p-edge && without != got {
					t.Errorf("a slot before the edge moved: %+d without an edge, %+d with it", without-start, got-start)
				}
			})
		}
	}
	// A hold that ends inside the edge holds its fixed window (FixedAt's
	// pause rule), and the next window opens at its first edge's end.
	w := algorithms[0].w
	start := 10*p + w.Anchor
	var counts algorithm.Counts
	if got := algorithm.FixedAt(w, &counts, start, start+p-edge/2, 1); got != start+p+edge {
		t.Errorf("hold ending inside the edge: %+d, want the next window's first edge's end %+d", got-start, p+edge)
	}
}

// TestSaturatedWindowsKeepTheirEdges: a fixed window's or a sliding
// counter's stream of requests, each asked for the moment the one before
// it leaves (a queue that never empties), departs only between each
// window's two edges, at rates from a few a second to thousands: no
// departure in the span where a server counting on arrival, or one whose
// clock lags, would count it in another window than the store.
func TestSaturatedWindowsKeepTheirEdges(t *testing.T) {
	const p = 1_000_000 // 1 s windows (µs)
	for _, alg := range []struct {
		name string
		at   func(w algorithm.Window, c *algorithm.Counts, floor, hold, cost int64) int64
		book func(w algorithm.Window, c *algorithm.Counts, now, t, cost int64) int64
	}{
		{"fixed", algorithm.FixedAt, algorithm.FixedBook},
		{"sliding counter", algorithm.CounterAt, algorithm.CounterBook},
	} {
		for _, quota := range []int64{4, 19, 98, 980, 4900} {
			t.Run(alg.name+"/"+itoa(quota), func(t *testing.T) {
				edged := algorithm.Window{Period: p, Quota: quota, Edge: 20_000}
				const windows = 12
				got := saturate(t, edged, alg.at, alg.book, windows)
				// The edges cost no more than the span they take (4 %
				// here), next to the same stream without them.
				without := saturate(t, algorithm.Window{Period: p, Quota: quota}, alg.at, alg.book, windows)
				t.Logf("%d departures in %d windows, %d without the edges", got, windows, without)
				if float64(got) < float64(without)*(1-2*float64(edged.Edge)/p)-1 {
					t.Errorf("%d departures in %d windows with the edges, %d without", got, windows, without)
				}
			})
		}
	}
}

// saturate runs a stream of requests through w, each asked for the
// moment the one before it departs, for the given number of whole
// windows, and returns how many departed. It fails t on a
// departure inside either of a window's edges.
func saturate(t *testing.T, w algorithm.Window, at func(w algorithm.Window, c *algorithm.Counts, floor, hold, cost int64) int64, book func(w algorithm.Window, c *algorithm.Counts, now, t, cost int64) int64, windows int64) int {
	t.Helper()
	var c algorithm.Counts
	start := 10 * w.Period
	n := 0
	for now := start; ; n++ {
		d := at(w, &c, now, 0, 1)
		if d >= start+windows*w.Period {
			return n
		}
		if e := d - w.Start(d); e < w.Edge || e >= w.Period-w.Edge {
			t.Fatalf("request %d departs %d µs into its window, within an edge of %d µs", n, e, w.Edge)
		}
		book(w, &c, now, d, 1)
		now = d
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
