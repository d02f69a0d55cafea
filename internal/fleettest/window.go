package fleettest

import (
	"slices"
	"time"
)

// The helpers in this file analyse arrival times: offsets from the recording
// server's epoch (see [Server.Times]). They sort a copy when needed, so the
// input order does not matter and the input is never modified.

// Window is a time interval [From, To) of offsets from a server's epoch.
type Window struct {
	From, To time.Duration
}

// Len returns the window's length.
func (w Window) Len() time.Duration { return w.To - w.From }

// MaxInWindow returns the largest number of arrivals that fall in one
// half-open window [t, t+w) of length w, over every t, and the window where
// that maximum first occurs. It is the count a server enforcing a strict
// sliding window of length w sees at its busiest. For an empty input it
// returns 0 and the zero Window; w ≤ 0 counts nothing.
func MaxInWindow(times []time.Duration, w time.Duration) (int, Window) {
	if len(times) == 0 || w <= 0 {
		return 0, Window{}
	}
	ts := sorted(times)
	best, bestAt := 0, 0
	// The busiest window can always be slid right until it starts at an
	// arrival, so only windows starting at an arrival need checking.
	j := 0
	for i := range ts {
		for j < len(ts) && ts[j] < ts[i]+w {
			j++
		}
		if n := j - i; n > best {
			best, bestAt = n, i
		}
	}
	return best, Window{From: ts[bestAt], To: ts[bestAt] + w}
}

// MaxInWindowStarting is [MaxInWindow] for the windows [t, t+w) whose
// start t lies in [from, to): the busiest second around an instant, say,
// when the windows of the whole run do not tell which event filled them.
// It returns 0 and the zero Window when no such window holds an arrival,
// or when w ≤ 0 or to ≤ from.
func MaxInWindowStarting(times []time.Duration, w, from, to time.Duration) (int, Window) {
	if len(times) == 0 || w <= 0 || to <= from {
		return 0, Window{}
	}
	ts := sorted(times)
	// A window can slide right to its first arrival without losing one,
	// so the candidates are the arrivals in [from, to), plus the last
	// start of all (to, less 1 ns), which covers every window whose
	// arrivals all lie at or after to.
	var starts []time.Duration
	lo, _ := slices.BinarySearch(ts, from)
	for i := lo; i < len(ts) && ts[i] < to; i++ {
		starts = append(starts, ts[i])
	}
	starts = append(starts, to-1)
	best, bestAt := 0, time.Duration(0)
	for _, s := range starts {
		i, _ := slices.BinarySearch(ts, s)
		j, _ := slices.BinarySearch(ts, s+w)
		if n := j - i; n > best {
			best, bestAt = n, s
		}
	}
	if best == 0 {
		return 0, Window{}
	}
	return best, Window{From: bestAt, To: bestAt + w}
}

// CountIn returns the number of arrivals in [from, to).
func CountIn(times []time.Duration, from, to time.Duration) int {
	n := 0
	for _, t := range times {
		if t >= from && t < to {
			n++
		}
	}
	return n
}

// RateIn returns the arrivals per second in [from, to), or 0 when the
// interval is empty.
func RateIn(times []time.Duration, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	return float64(CountIn(times, from, to)) / (to - from).Seconds()
}

// FirstIn returns the earliest arrival in [from, to) and true, or false when
// there is none: "no arrival in [a, b)" is !ok.
func FirstIn(times []time.Duration, from, to time.Duration) (time.Duration, bool) {
	first, ok := time.Duration(0), false
	for _, t := range times {
		if t >= from && t < to && (!ok || t < first) {
			first, ok = t, true
		}
	}
	return first, ok
}

// PerSecond returns the number of arrivals in each whole second after from:
// element i counts [from+i s, from+(i+1) s), up to the last arrival.
// Arrivals before from are ignored.
func PerSecond(times []time.Duration, from time.Duration) []int {
	var out []int
	for _, t := range times {
		if t < from {
			continue
		}
		i := int((t - from) / time.Second)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// Span returns the first and last arrival; ok is false for no arrival.
func Span(times []time.Duration) (first, last time.Duration, ok bool) {
	if len(times) == 0 {
		return 0, 0, false
	}
	first, last = times[0], times[0]
	for _, t := range times[1:] {
		first, last = min(first, t), max(last, t)
	}
	return first, last, true
}

func sorted(times []time.Duration) []time.Duration {
	if slices.IsSorted(times) {
		return times
	}
	ts := slices.Clone(times)
	slices.Sort(ts)
	return ts
}
