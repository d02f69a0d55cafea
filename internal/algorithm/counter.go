package algorithm

// This file is the sliding counter (Cloudflare's): the windows of a fixed
// window with Anchor 0, and at time t in the window starting at s the
// estimate
//
//	prev·(Period - (t-s))/Period + cur
//
// of the units departed in the Period before t, prev and cur being the
// previous and the current window's counts: the previous window's count as
// if spread evenly over it, weighted by how much of it is still inside the
// sliding window. A request of cost c departs at the earliest t at which
// estimate + c ≤ Quota. Requests are booked in order (t is never before the
// latest departure booked), so the counts of a window are exactly the
// departures up to t and a booking never raises the estimate a waiter
// ahead was admitted under.
//
// All arithmetic is in integers: estimate + c ≤ Quota is
// prev·(Period-e) + (cur+c)·Period ≤ Quota·Period, e = t-s.
//
// Edge, as for the fixed window (FixedAt), is the span at either end of
// each window in which nothing departs. At its end: a request that would leave there
// reaches a server counting on arrival after the boundary, which counts it
// in the new window at full weight while the estimate above has it in the
// old one, whose weight falls through the window. n such requests leave
// the estimate below the server's by n·e/Period, growing through the whole
// next window (docs/ALGORITHMS.md, "the sliding counter's edge"). Booked in
// the next window instead, they are counted where the server counts them.
// At its start: a server whose clock lags the fleet's counts a request
// that leaves there in the window before, whose count is whole there.
// A slot inside a window is where the estimate falls far enough, and the
// estimate falls by at most Quota/Period a unit of time: a server off by
// less than the headroom of a Period sees the same room, so such a slot
// needs no edge of its own.

// CounterAt returns the earliest time ≥ floor (and ≥ c.Last), outside
// both Edges of every window, at which a request of cost units (1 ≤ cost ≤
// Quota) fits. hold is the end of a
// pause (0 for none): nothing departs before it, and every window that
// starts before it counts as full, so that after the pause the estimate
// falls from the quota as the full previous window slides out: the bucket
// refills from empty over one Period.
func CounterAt(w Window, c *Counts, floor, hold, cost int64) int64 {
	t := max(floor, c.Last, hold)
	for {
		s := w.Start(t)
		t = max(t, s+w.Edge)
		if t >= s+w.Period-w.Edge {
			t = s + w.Period
			continue
		}
		cur := c.Get(w, s)
		if s < hold {
			cur = w.Quota
		}
		if cur+cost > w.Quota {
			t = s + w.Period
			continue
		}
		prev := c.Get(w, s-w.Period)
		if s-w.Period < hold {
			prev = w.Quota
		}
		if prev == 0 {
			return t
		}
		// prev·(Period-e) ≤ (Quota-cur-cost)·Period.
		e := w.Period - (w.Quota-cur-cost)*w.Period/prev
		if at := s + e; at > t {
			t = at
		}
		if t < s+w.Period-w.Edge {
			return t
		}
		t = s + w.Period
	}
}

// CounterBook counts a request of cost units departing at t (≥ every
// departure booked before); it returns the start of its window, which a
// refund names.
func CounterBook(w Window, c *Counts, now, t, cost int64) int64 {
	c.Trim(w, w.Start(now)-w.Period)
	s := w.Start(t)
	c.Add(w, s, cost)
	c.Last = max(c.Last, t)
	return s
}

// CounterEstimate returns the estimate at t, in units of cost scaled by
// Period (estimate·Period), for tests of the quota: it is at most
// Quota·Period at every departure.
func CounterEstimate(w Window, c *Counts, t int64) int64 {
	s := w.Start(t)
	return c.Get(w, s-w.Period)*(w.Period-(t-s)) + c.Get(w, s)*w.Period
}
