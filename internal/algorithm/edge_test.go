package algorithm_test

import (
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
// goes to the next window (its start, or later where that one is full or
// the previous window's weight leaves no room). The Edge takes nothing
// else: a slot before the edge is where it would be without one.
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
			{"at the edge", 0, 0, 0, p - edge, p},
			{"inside the edge", 0, 2, 0, p - 1, p},
			{"inside the edge, next window full", 0, 0, 3, p - 5_000, 2 * p},
			{"at a window's start", 0, 0, 0, 0, 0},
			{"window full before the edge", 0, 3, 0, 100_000, p},
		}},
		{"sliding counter", algorithm.Window{Period: p, Quota: 4, Edge: edge}, algorithm.CounterAt, []edgeCase{
			{"mid-window, room", 0, 0, 0, 500_000, 500_000},
			{"just before the edge", 0, 0, 0, p - edge - 1, p - edge - 1},
			{"at the edge", 0, 0, 0, p - edge, p},
			// cur 3 of 4 weighs 3 at the next window's start: 3 + 1 ≤ 4.
			{"inside the edge", 0, 3, 0, p - 1, p},
			// cur 4: the next window waits for it to slide out to 3, a
			// quarter of the window in.
			{"inside the edge, window full", 0, 4, 0, p - 5_000, p + p/4},
			// prev 4 weighs 4·(1 − e) + 1 ≤ 4 from e = 1/4: before the edge.
			{"weight slides out before the edge", 4, 0, 0, 0, p / 4},
			// prev 4, cur 3: 4·(1 − e) + 4 ≤ 4 only at e = 1, inside the
			// edge, so the next window (prev 3 fits 3 + 1 at its start).
			{"weight slides out only inside the edge", 4, 3, 0, 0, p},
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
				if without := a.at(noEdge, &counts, start+c.floor, 0, 1); got < start+p-edge && without != got {
					t.Errorf("a slot before the edge moved: %+d without an edge, %+d with it", without-start, got-start)
				}
			})
		}
	}
	// A hold that ends inside the edge holds its fixed window (FixedAt's
	// pause rule) and the edge does not move the next window's start.
	w := algorithms[0].w
	start := 10*p + w.Anchor
	var counts algorithm.Counts
	if got := algorithm.FixedAt(w, &counts, start, start+p-edge/2, 1); got != start+p {
		t.Errorf("hold ending inside the edge: %+d, want the next window's start %+d", got-start, p)
	}
}
