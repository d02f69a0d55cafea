package fleettest

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// A process that the OS does not run for a while sends late every request
// whose slot fell in that time, and they then arrive together: on a busy
// machine a window can hold more than a perfect limiter would send, through
// no fault of the limiter. Stall watchers measure those pauses, in the
// workers (Summary.Stalls) and in the test process ([WatchStalls]), so that
// tests can tell the two apart and report both.
const (
	// stallTick is how often a watcher wakes up.
	stallTick = 5 * time.Millisecond
	// StallThreshold is the lateness from which a wake-up counts as a
	// stall.
	StallThreshold = 10 * time.Millisecond
)

// Stall is a time a process was not running: a watcher due at At−Late woke
// at At.
type Stall struct {
	At   time.Time     `json:"at"` // wall clock
	Late time.Duration `json:"late"`
}

// stallWatch runs one watcher goroutine.
type stallWatch struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	stalls []Stall
}

func startStallWatch() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *stallWatch) run() {
	defer close(w.done)
	t := time.NewTicker(stallTick)
	defer t.Stop()
	due := time.Now().Add(stallTick)
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		if late := now.Sub(due); late >= StallThreshold {
			w.mu.Lock()
			w.stalls = append(w.stalls, Stall{At: now.Round(0), Late: late})
			w.mu.Unlock()
		}
		// A ticker drops the ticks it could not deliver; the next one is
		// due one tick from now, not from the missed one.
		due = now.Add(stallTick)
	}
}

// end stops the watcher and returns what it saw.
func (w *stallWatch) end() []Stall {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.stalls)
}

// WatchStalls measures the stalls of the test process (where the recording
// server runs) until the returned function is called or the test ends. The
// function returns the stalls seen so far and stops the watcher; it may be
// called more than once.
func WatchStalls(t testing.TB) func() []Stall {
	w := startStallWatch()
	var once sync.Once
	var stalls []Stall
	end := func() []Stall {
		once.Do(func() { stalls = w.end() })
		return stalls
	}
	t.Cleanup(func() { end() })
	return end
}

// StallTime returns the total time, counting overlaps once, that any of
// the stalls covers among the stall intervals that reach into win (offsets
// from epoch). Each stall counts whole, since the requests it delayed land
// where it ends.
func StallTime(stalls []Stall, epoch time.Time, win Window) time.Duration {
	type span struct{ from, to time.Duration }
	var spans []span
	for _, s := range stalls {
		to := s.At.Sub(epoch)
		from := to - s.Late
		if to > win.From && from < win.To {
			spans = append(spans, span{from, to})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	var total, end time.Duration
	for i, s := range spans {
		if i == 0 || s.from > end {
			total += s.to - s.from
			end = s.to
		} else if s.to > end {
			total += s.to - end
			end = s.to
		}
	}
	return total
}
