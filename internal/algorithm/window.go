package algorithm

// Window is the shape of a window algorithm's bucket: Quota units of cost
// per Period, windows starting at Anchor + k·Period (the sliding log and
// the sliding counter keep Anchor 0). Period and Quota are at least 1.
// Edge, for a fixed window or a sliding counter, is the span at either
// end of each window in which nothing is booked in that window (see
// FixedAt and CounterAt); 0 for none, less than Period/2, and 0 for the
// sliding log.
type Window struct {
	Period int64
	Quota  int64
	Anchor int64
	Edge   int64
}

// Start returns the start of the window holding t.
func (w Window) Start(t int64) int64 {
	d := (t - w.Anchor) % w.Period
	if d < 0 {
		d += w.Period
	}
	return t - d
}

// Counts is the units of cost booked in consecutive windows: N[i] in the
// window starting at First + i·Period. Last is the latest departure
// booked (the sliding counter books in order, see CounterAt). The zero
// Counts has nothing booked.
type Counts struct {
	Last  int64
	First int64
	N     []int64
}

// Get returns the units booked in the window starting at start.
func (c *Counts) Get(w Window, start int64) int64 {
	if len(c.N) == 0 || start < c.First {
		return 0
	}
	i := (start - c.First) / w.Period
	if i >= int64(len(c.N)) {
		return 0
	}
	return c.N[i]
}

// Add adds n (which may be negative, for a refund; a count never drops
// below 0) to the window starting at start.
func (c *Counts) Add(w Window, start, n int64) {
	if len(c.N) == 0 {
		if n <= 0 {
			return
		}
		c.First, c.N = start, append(c.N[:0], 0)
	}
	if start < c.First {
		if n <= 0 {
			return // a window already dropped: nothing to give back
		}
		k := (c.First - start) / w.Period
		c.N = append(make([]int64, k, k+int64(len(c.N))), c.N...)
		c.First = start
	}
	i := (start - c.First) / w.Period
	for int64(len(c.N)) <= i {
		if n <= 0 {
			return
		}
		c.N = append(c.N, 0)
	}
	c.N[i] = max(c.N[i]+n, 0)
}

// Trim drops the windows that start before from, and trailing empty ones.
func (c *Counts) Trim(w Window, from int64) {
	if len(c.N) > 0 && c.First < from {
		k := min((from-c.First)/w.Period, int64(len(c.N)))
		c.N = c.N[k:]
		c.First += k * w.Period
	}
	for len(c.N) > 0 && c.N[len(c.N)-1] == 0 {
		c.N = c.N[:len(c.N)-1]
	}
	if len(c.N) == 0 {
		c.N = nil
	}
}

// End returns the end of the last window with a count, or 0 for none:
// after it (and a Period more for the sliding counter) the state equals a
// new one.
func (c *Counts) End(w Window) int64 {
	if len(c.N) == 0 {
		return 0
	}
	return c.First + int64(len(c.N))*w.Period
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
