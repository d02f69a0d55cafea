package fakeapi

import (
	"slices"
	"sync"
	"time"
)

// Window admits at most Limit requests per key in any span of Period,
// counted strictly over a sliding window: a request at time t is admitted
// when fewer than Limit requests of its key were admitted in (t-Period, t].
// Rejected requests do not count. The zero value is not usable; create one
// with [NewWindow]. A Window is safe for concurrent use.
type Window struct {
	limit  int
	period time.Duration

	mu       sync.Mutex
	admitted map[string][]time.Time // per key, in order, trimmed to the window
}

// NewWindow returns a Window admitting limit requests per key per period.
func NewWindow(limit int, period time.Duration) *Window {
	return &Window{limit: limit, period: period, admitted: make(map[string][]time.Time)}
}

// Allow admits a request of key at time now, and counts it, or rejects it.
func (w *Window) Allow(key string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ts := w.admitted[key]
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-w.period)) {
		i++
	}
	ts = ts[i:]
	if len(ts) >= w.limit {
		w.admitted[key] = ts
		return false
	}
	w.admitted[key] = append(ts, now)
	return true
}

// Log records arrival times, for figures after a run. The zero value is
// ready to use; a Log is safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	times []time.Time
}

// Add records an arrival at t.
func (l *Log) Add(t time.Time) {
	l.mu.Lock()
	l.times = append(l.times, t)
	l.mu.Unlock()
}

// Len returns the number of arrivals recorded.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.times)
}

// MaxIn returns the most arrivals recorded in any span of length d,
// counted as Window counts them: in (t-d, t].
func (l *Log) MaxIn(d time.Duration) int {
	l.mu.Lock()
	ts := slices.Clone(l.times)
	l.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, lo := 0, 0
	for hi, t := range ts {
		for !ts[lo].After(t.Add(-d)) {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
