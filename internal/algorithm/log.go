package algorithm

import "sort"

// This file is the sliding log: one entry per unit of cost at its
// departure time, and at most Quota entries in any window (t-Period, t].
// Requests are booked in order (never before the latest entry), so that
// the only window a booking at t can fill is the one ending at t: the
// request fits when fewer than Quota-cost+1 entries lie after t-Period.
// Entries at or before now-Period count for nothing and are dropped; the
// log holds the entries of the last Period and the bookings ahead, at most
// Quota per Period spanned.
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

// LogBook adds cost entries at t (≥ every entry).
func LogBook(w Window, l *Log, now, t, cost int64) {
	l.Trim(w, now)
	for range cost {
		l.E = append(l.E, t)
	}
}

// LogRefund removes up to cost entries at t: those of a cancelled
// request. Removing entries only lowers the counts other requests were
// admitted under, so a refund is always safe.
func LogRefund(l *Log, t, cost int64) {
	i := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t })
	k := i
	for k > 0 && i-k < int(cost) && l.E[k-1] == t {
		k--
	}
	l.E = append(l.E[:k], l.E[i:]...)
}

// LogCount returns the entries in (t-Period, t], for tests of the quota.
func LogCount(w Window, l *Log, t int64) int64 {
	lo := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t-w.Period })
	hi := sort.Search(len(l.E), func(i int) bool { return l.E[i] > t })
	return int64(hi - lo)
}
