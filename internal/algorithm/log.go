package algorithm

import "sort"

// This file is the sliding log: one entry per unit of cost at its
// departure time, and at most Quota entries in any window (t-Period, t].
// Requests are booked in order (never before the latest entry), so that
// the only window a booking at t can fill is the one ending at t: the
// request fits when fewer than Quota-cost+1 entries lie after t-Period.
// Entries at or before now-Period count for nothing and are dropped, and
// the log keeps only its newest Quota entries, however far ahead waiters
// have booked: memory is bounded by the quota (see LogBook for why the
// older entries decide nothing).
//
// A pause ending at hold counts the log as full until then: as if Quota
// entries had departed evenly over [hold-Period, hold), of which
// Quota - ⌊(t-hold)·Quota/Period⌋ still lie in the window at t ≥ hold. So
// after a pause the log refills from empty over one Period instead of
// letting a burst of Quota go at the pause's end.

// Log is a sliding log's entries, in order.
type Log struct {
	E []int64
}

// Trim drops the entries at or before now-Period.
func (l *Log) Trim(w Window, now int64) {
	i := sort.Search(len(l.E), func(i int) bool { return l.E[i] > now-w.Period })
	// Reslicing, not copying: the dropped prefix goes with the next
	// reallocation of append, so a trim costs O(log n).
	l.E = l.E[i:]
	if len(l.E) == 0 {
		l.E = nil
	}
}

// LogAt returns the earliest time ≥ floor at which a request of cost
// units (1 ≤ cost ≤ Quota) fits in log l, trimmed at the caller's now.
// hold is the end of a pause (0 for none).
func LogAt(w Window, l *Log, floor, hold, cost int64) int64 {
	n := int64(len(l.E))
	t := max(floor, hold)
	if n > 0 {
		t = max(t, l.E[n-1])
	}
	if hold == 0 || t >= hold+w.Period {
		// The window at t must hold at most Quota-cost entries: the
		// (n-Quota+cost)-th entry must have left it.
		if k := n - w.Quota + cost; k > 0 {
			t = max(t, l.E[k-1]+w.Period)
		}
		return t
	}
	// Entries 1..j have left the window on [E[j]+Period, E[j+1]+Period);
	// in that span the phantom entries of the pause must number at most
	// q = Quota - cost - (n-j).
	j := int64(sort.Search(len(l.E), func(i int) bool { return l.E[i] > t-w.Period }))
	for ; j <= n; j++ {
		lo := t
		if j > 0 {
			lo = max(lo, l.E[j-1]+w.Period)
		}
		q := w.Quota - cost - (n - j)
		if q < 0 {
			continue
		}
		at := lo
		if q < w.Quota {
			at = max(at, hold+ceilDiv((w.Quota-q)*w.Period, w.Quota))
		}
		if j == n || at < l.E[j]+w.Period {
			return at
		}
	}
	return t // not reached: with j = n the loop returns
}

// LogBook adds cost entries at t (≥ every entry) and keeps the newest
// Quota entries.
//
// Why the older ones decide nothing: LogAt, with n entries E[0..n-1] in
// order, reads only E[n-1] (the order), E[n-Quota+cost-1] (the entry
// that must have left the window) and, under a pause, E[j-1] and E[j]
// for the j whose q = Quota-cost-(n-j) ≥ 0, that is j ≥ n-Quota+cost.
// With cost ≥ 1 every index it reads is ≥ n-Quota: one of the newest
// Quota entries, at the same rank from the end whether or not the older
// ones are kept (the j it starts from, the number of entries at or before
// t-Period, shifts by the same n-Quota where it matters, and below
// n-Quota+cost the loop only continues). Bookings are monotone, so a new
// entry is always the newest and the newest Quota after it are the newest
// Quota of the log trimmed before it: trimming now or never gives the
// same decisions forever. Dropping entries by age (Trim) removes a prefix
// too, so the two trims commute. What trimming loses is only what a
// refund would need: see LogRefund.
//
// The decisions are those of the untrimmed log for the quota it was
// trimmed under, and for a larger quota too (a window ending at or after
// the newest entry holds at most Quota entries, all among the newest
// Quota). A change of quota within a Period of entries trimmed under
// another is not covered: a quota lowered and then raised again sees only
// the lower quota's entries, and a refund under a raised quota takes the
// log for not full (LogRefund), so for one Period either may admit more
// than the new quota.
func LogBook(w Window, l *Log, now, t, cost int64) {
	l.Trim(w, now)
	for range cost {
		l.E = append(l.E, t)
	}
	if n := int64(len(l.E)); n > w.Quota {
		// Reslicing, as Trim does: append reallocates at most 2·Quota.
		l.E = l.E[n-w.Quota:]
	}
}

// LogRefund gives back up to cost entries at t, those of a cancelled
// request, trimming the log at now first (by age, then to its newest
// Quota). It reports how many entries it gave back (removed or moved).
//
// Trimming by rank makes a plain removal unsafe: entries dropped from a
// full log may still lie in the window, and with the refunded ones gone
// the window would admit more than the quota. So a log of Quota entries
// moves the refunded entries to its oldest entry's time instead; a log of
// fewer removes them. Proof: call the entries kept K and the departures
// really booked and not cancelled F. The invariant is that for every x ≥
// now-Period, #{K > x} ≥ min(Quota, #{F > x}); then whatever LogAt admits
// on K it admits on F (it asks whether at most Quota-cost < Quota entries
// lie after t-Period, and its floor, the newest entry, is no earlier in K),
// so F never holds more than the quota in a window. A booking adds the
// same newest entry to both; trims by age and by rank keep the invariant.
// A refund takes cost entries at t from F and the r ≤ cost found from K:
// for x ≥ t nothing changes; for x < t where #{K > x} < Quota, F had no
// more than K above x and loses at least as many; for x < t where K holds
// Quota entries above x, x is below K's oldest entry, and the r moved
// there still count. So the capacity of a refund on a full log comes back
// when its oldest entry leaves the window, not at once, and a log whose
// oldest entry is at t itself (all kept entries at one instant) gives
// nothing back before the window passes: where the sliding log cannot
// refund.
func LogRefund(w Window, l *Log, now, t, cost int64) int64 {
	l.Trim(w, now)
	if n := int64(len(l.E)); n > w.Quota {
		l.E = l.E[n-w.Quota:] // a quota lowered since the last booking
	}
	full := int64(len(l.E)) == w.Quota
	i := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t })
	k := i
	for k > 0 && int64(i-k) < cost && l.E[k-1] == t {
		k--
	}
	r := int64(i - k)
	if r == 0 {
		return 0
	}
	oldest := l.E[0]
	if full && oldest == t {
		return 0 // moved to the oldest, they would stay where they are
	}
	l.E = append(l.E[:k], l.E[i:]...)
	if full {
		moved := make([]int64, r, int64(len(l.E))+r)
		for j := range moved {
			moved[j] = oldest
		}
		l.E = append(moved, l.E...)
	}
	if len(l.E) == 0 {
		l.E = nil
	}
	return r
}

// LogCount returns the entries in (t-Period, t], for tests of the quota.
func LogCount(w Window, l *Log, t int64) int64 {
	lo := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t-w.Period })
	hi := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t })
	return int64(hi - lo)
}
