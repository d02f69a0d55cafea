package algorithm

// This file is the fixed window: at most Quota units of cost depart in each
// window [Anchor + k·Period, Anchor + (k+1)·Period), each counted in the
// window of its departure. A request that does not fit in its window waits
// for the first later window with room, where it is counted now: waiters
// queue in future windows without polling. Across a boundary up to twice
// the quota can depart within one Period (the end of one window, the start
// of the next): that is the algorithm, and the servers that count so
// (GitHub's hourly quota) allow it too.

// FixedAt returns the earliest time ≥ floor at which a request of cost
// units (1 ≤ cost ≤ Quota) fits in its window. hold is the end of a pause
// (0 for none, or one long past): nothing departs before it, and a window
// that starts before it counts as full, so a pause ending inside a window
// holds the rest of that window too (the server that refused counts it
// full). A time within Edge of either end of its window is no slot: one in
// the window's last Edge goes to the next window, where a server that
// counts it on arrival, a transit after it leaves, would count it anyway,
// and one in its first Edge waits for its end, where a server whose clock
// lags the fleet's by less than Edge counts it in this window too, not in
// the one before (which may be full).
func FixedAt(w Window, c *Counts, floor, hold, cost int64) int64 {
	t := max(floor, hold)
	if hold > 0 && w.Start(t) < hold {
		t = w.Start(t) + w.Period
	}
	for {
		s := w.Start(t)
		t = max(t, s+w.Edge)
		if t < s+w.Period-w.Edge && c.Get(w, s)+cost <= w.Quota {
			return t
		}
		t = s + w.Period
	}
}

// FixedBook counts a request of cost units departing at t; it returns the
// start of its window, which a refund names.
func FixedBook(w Window, c *Counts, now, t, cost int64) int64 {
	c.Trim(w, w.Start(now))
	s := w.Start(t)
	c.Add(w, s, cost)
	c.Last = max(c.Last, t)
	return s
}
