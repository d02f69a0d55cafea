package feedback

import "math"

// ledger is a ring of (time, count) samples of one bucket, spaced so that
// ledgerSize of them span two of the rule's periods. Each sample keeps how
// long its store call took (u, ns): the count is of some instant within
// it, which the sample's time cannot tell.
type ledger struct {
	t, n, u   [ledgerSize]int64
	head, len int
	// restarted is set once the store has counted afresh after a count
	// that lapsed (its cap's span ran out while nothing renewed it, as in a
	// pause): the requests sent between the two counts are then in the
	// server's window but in no count (see decide).
	restarted bool
}

// add records that the bucket's count was n at t, as read by a store call
// that took u, unless the last sample is closer than spacing. A count
// lower than the last one means the store started counting afresh: the
// ledger does.
func (l *ledger) add(t, n, spacing, u int64) {
	if l.len > 0 {
		last := (l.head + l.len - 1) % ledgerSize
		switch {
		case n < l.n[last]:
			l.len = 0
			l.restarted = true
		case t < l.t[last]+spacing:
			return
		}
	}
	i := (l.head + l.len) % ledgerSize
	if l.len == ledgerSize {
		l.head = (l.head + 1) % ledgerSize
	} else {
		l.len++
	}
	l.t[i], l.n[i], l.u[i] = t, n, max(u, 0)
}

// window returns the units sent in the w before t, and the span of it the
// count covers (less than w when the count began within it, see at). The
// samples reach to the newest one taken by t, at end; from there to t the
// count is carried on at the rate of the w before end. A full window
// slides with t, so what it lost at its start between end−w and t−w is
// taken off again: carrying on alone would count a window of w + (t−end),
// up to a sixteenth of a window's traffic too much, which is the reserve
// of a quota of 100 spent (the shared-quota run held the server's window
// at 99–100 that way). A replica whose waiters all sleep takes no sample
// until one of them is back, so the newest sample may be well before t;
// one older than w/maxStaleShare is too old to carry on (false), and so is
// a ledger that does not reach back over w.
func (l *ledger) window(w, t int64) (own float64, covered int64, ok bool) {
	if l.len == 0 {
		return 0, 0, false
	}
	e := l.newest(t)
	if e < 0 || t-l.t[e] > w/maxStaleShare {
		return 0, 0, false
	}
	end := l.t[e]
	a, ok := l.at(end - w)
	if !ok {
		return 0, 0, false
	}
	b, _ := l.at(end)
	own = max(b-a, 0)
	if end-w >= l.t[l.head] {
		if t > end {
			left, _ := l.at(t - w)
			own = max(own+own*float64(t-end)/float64(w)-(left-a), 0)
		}
		return own, w, true
	}
	// The count began within the window (at the oldest sample, as at
	// found): the window is all of the count, and it grows with t. Over a
	// count that covers less than the staleness bound, its rate says too
	// little to carry on at all.
	covered = end - l.t[l.head]
	if covered >= w/maxStaleShare {
		own += own * float64(t-end) / float64(covered)
	}
	return own, max(covered, 1) + t - end, true
}

// slack returns how many units more than window counts (own, over the
// span covered) the fleet may have sent in the w before t, by what the
// samples cannot tell. The count is known at the samples only: at the
// window's start it lies anywhere between the samples around it, and
// window draws a straight line there, while a fleet whose replicas book
// in turns reports in bursts (8 × 16 at 200/s: each replica books its 16
// waiters 5 ms apart, then nothing for 560 ms, so that a start fell
// across a gap of 451 ms and drew the count 2.7 units above what the
// other replicas' samples showed, a cap of 191/s for a fleet alone at its
// quota of 200). And the newest sample's count is of some instant within
// its store call: what the fleet sent meanwhile may be missing from it (a
// call stalled for half a second at 200/s would miss a hundred).
// A count that began within the window has no start to doubt. And from
// the newest sample to t, window carries the count on at the window's
// mean, while the fleet may have sent at up to rate (units a second, its
// rule's pace) meanwhile: just after a pause the mean is the pause's, next
// to nothing, and a replica whose newest sample was 34 ms old read own
// 1.3 units where the server had counted 9 of the fleet's, others' 8.7,
// a cut to 186/s of 196 (8x16 pause cell, 2026-12-05).
func (l *ledger) slack(w, t int64, own float64, covered int64, rate float64) float64 {
	if l.len == 0 || covered <= 0 {
		return 0
	}
	var s float64
	if e := l.newest(t); e >= 0 {
		// Its count is of as early as u before its time: own was sent
		// over covered − u, at own/(covered − u).
		if l.u[e] >= covered {
			return math.Inf(1)
		}
		s = own * float64(l.u[e]) / float64(covered-l.u[e])
		if gap := float64(t - l.t[e]); gap > 0 {
			s += max(rate*gap/1e9-own*gap/float64(covered), 0)
		}
	}
	start := t - w
	lo := l.newest(start)
	if lo < 0 {
		return s
	}
	if mid, ok := l.at(start); ok {
		s += max(mid-float64(l.n[lo]), 0)
	}
	return s
}

// newest returns the index of the newest sample taken by t, or −1.
func (l *ledger) newest(t int64) int {
	for k := l.len - 1; k >= 0; k-- {
		if i := (l.head + k) % ledgerSize; l.t[i] <= t {
			return i
		}
	}
	return -1
}

// minCoveredShare: a reading needs the count to cover at least this share
// of its window (1/8): over less, a reading against the ledger is mostly
// the noise of the requests in flight, and a replica that has just begun
// (an idle one's first request) has counted next to nothing.
const minCoveredShare = 8

// maxStaleShare bounds how far before a reading the newest sample may be,
// as a share of the window: a sixteenth of the window's traffic carried on
// at its mean rate errs by a little of that sixteenth.
const maxStaleShare = 16

// since returns the units sent after t, up to the newest sample.
func (l *ledger) since(t int64) (float64, bool) {
	a, ok := l.at(t)
	if !ok {
		return 0, false
	}
	return max(float64(l.n[(l.head+l.len-1)%ledgerSize])-a, 0), true
}

// at returns the count at t, interpolated between the samples around it
// (the newest after them); false when t is before the oldest sample,
// unless that sample was taken as the count began (its count at most
// countStart): nothing was counted before, so the count at t is its start.
// Counts come in fractions of a unit: rounding the ends of a window down
// errs by up to a unit, which is the whole reserve of a quota of 20.
func (l *ledger) at(t int64) (float64, bool) {
	if l.len == 0 {
		return 0, false
	}
	if t < l.t[l.head] {
		if l.n[l.head] <= countStart {
			return float64(min(l.n[l.head], 1)), true
		}
		return 0, false
	}
	prev := l.head
	for k := 1; k < l.len; k++ {
		i := (l.head + k) % ledgerSize
		if l.t[i] > t {
			span := l.t[i] - l.t[prev]
			if span <= 0 {
				return float64(l.n[prev]), true
			}
			return float64(l.n[prev]) + float64(l.n[i]-l.n[prev])*float64(t-l.t[prev])/float64(span), true
		}
		prev = i
	}
	return float64(l.n[prev]), true
}
