package algorithm_test

import (
	"testing"

	"github.com/throttlekit/throttle/internal/algorithm"
)

// TestFixedAtEdge: a fixed window with an Edge gives no slot in the last
// Edge of a window, whatever room it has: the request goes to the next
// window's start (or later, if that one is full), and is counted there.
// Without an Edge the same request departs at once in the old window.
func TestFixedAtEdge(t *testing.T) {
	const p, edge = 1_000_000, 20_000 // 1 s windows, 20 ms edge (µs)
	w := algorithm.Window{Period: p, Quota: 3, Anchor: 250_000, Edge: edge}
	start := int64(10*p + 250_000) // a window's start
	cases := []struct {
		name   string
		booked int64 // units already in the window starting at start
		next   int64 // units already in the next window
		floor  int64
		want   int64
	}{
		{"mid-window, room", 0, 0, start + 500_000, start + 500_000},
		{"just before the edge", 0, 0, start + p - edge - 1, start + p - edge - 1},
		{"at the edge", 0, 0, start + p - edge, start + p},
		{"inside the edge", 2, 0, start + p - 1, start + p},
		{"inside the edge, next window full", 0, 3, start + p - 5_000, start + 2*p},
		{"at a window's start", 0, 0, start, start},
		{"window full before the edge", 3, 0, start + 100_000, start + p},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var counts algorithm.Counts
			counts.Add(w, start, c.booked)
			counts.Add(w, start+p, c.next)
			if got := algorithm.FixedAt(w, &counts, c.floor, 0, 1); got != c.want {
				t.Errorf("FixedAt(floor %+d µs from the window's start) = %+d, want %+d", c.floor-start, got-start, c.want-start)
			}
			noEdge := w
			noEdge.Edge = 0
			if c.booked < w.Quota && c.floor < start+p {
				if got := algorithm.FixedAt(noEdge, &counts, c.floor, 0, 1); got != c.floor {
					t.Errorf("without an edge: %+d, want the floor %+d", got-start, c.floor-start)
				}
			}
		})
	}
	// A hold that ends inside the edge holds its window (FixedAt's pause
	// rule) and the edge does not move the next window's start.
	var counts algorithm.Counts
	if got := algorithm.FixedAt(w, &counts, start, start+p-edge/2, 1); got != start+p {
		t.Errorf("hold ending inside the edge: %+d, want the next window's start %+d", got-start, p)
	}
}

// TestCounterAtEdge: a sliding counter with an Edge gives no slot in the
// last Edge of a window: the request goes to the next window, at its start
// when the previous window's weight leaves room there, else where it does.
// The Edge takes nothing else: a request that fits before the edge leaves
// where it would without one.
func TestCounterAtEdge(t *testing.T) {
	const p, edge = 1_000_000, 20_000 // 1 s windows, 20 ms edge (µs)
	w := algorithm.Window{Period: p, Quota: 4, Edge: edge}
	start := int64(10 * p) // a window's start
	cases := []struct {
		name      string
		prev, cur int64 // units already in the window before start, and in it
		floor     int64
		want      int64
	}{
		{"mid-window, room", 0, 0, start + 500_000, start + 500_000},
		{"just before the edge", 0, 0, start + p - edge - 1, start + p - edge - 1},
		{"at the edge", 0, 0, start + p - edge, start + p},
		{"inside the edge", 0, 3, start + p - 1, start + p},
		// cur 3 of 4 in the next window's previous: at the next window's
		// start the estimate is 3 + 1 ≤ 4, so it leaves there.
		{"inside the edge, full weight behind fits", 0, 3, start + p - 5_000, start + p},
		// cur 4: at the next window the previous 4 must slide out to 3,
		// a quarter of the window in.
		{"inside the edge, window full", 0, 4, start + p - 5_000, start + p + p/4},
		// prev 4 weighs 4·(1 − e) + 1 ≤ 4 from e = 1/4 on: before the edge.
		{"weight slides out before the edge", 4, 0, start, start + p/4},
		// prev 4, cur 3: 4·(1 − e) + 4 ≤ 4 only at e = 1, inside the
		// edge, so the next window (prev 3: e = 0 fits 3 + 1).
		{"weight slides out only inside the edge", 4, 3, start, start + p},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var counts algorithm.Counts
			counts.Add(w, start-p, c.prev)
			counts.Add(w, start, c.cur)
			if got := algorithm.CounterAt(w, &counts, c.floor, 0, 1); got != c.want {
				t.Errorf("CounterAt(floor %+d µs from the window's start) = %+d, want %+d", c.floor-start, got-start, c.want-start)
			}
			noEdge := w
			noEdge.Edge = 0
			if got, want := algorithm.CounterAt(noEdge, &counts, c.floor, 0, 1), algorithm.CounterAt(w, &counts, c.floor, 0, 1); want < start+p-edge && got != want {
				t.Errorf("a slot before the edge moved: %+d without an edge, %+d with it", got-start, want-start)
			}
		})
	}
}
