// Package fakeclock is a manual clock for deterministic tests: time moves
// only when the test calls Advance or Set, and timers fire then, in order of
// their deadlines.
package fakeclock

import (
	"sort"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/clock"
)

// Clock is a manual clock (it implements throttle.Clock). It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
	cond   *sync.Cond
}

// New returns a Clock set to start.
func New(start time.Time) *Clock {
	c := &Clock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the clock reaches Now()+d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		t.fired = true
		return t
	}
	c.timers = append(c.timers, t)
	c.cond.Broadcast()
	return t
}

// Advance moves the clock forward by d (backward if d < 0) and fires the
// timers that are due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set moves the clock to t and fires the timers that are due, earliest first.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// setLocked is Set with c.mu held.
func (c *Clock) setLocked(t time.Time) {
	c.now = t
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(t) {
			tm.fired = true
			tm.ch <- t
			continue
		}
		kept = append(kept, tm)
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Timers returns the number of pending timers.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers blocks until at least n timers are pending.
func (c *Clock) WaitTimers(n int) { c.WaitTimersOr(n, nil) }

// WaitTimersOr blocks until at least n timers are pending or stop, when not
// nil, returns true; stop is called with the clock's lock held, whenever a
// timer is made and after Wake. It is how a test driver learns that every
// goroutine it runs is asleep.
func (c *Clock) WaitTimersOr(n int, stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n && (stop == nil || !stop()) {
		c.cond.Wait()
	}
}

// Wake makes every WaitTimersOr check its condition again.
func (c *Clock) Wake() {
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}

// AdvanceToNext moves the clock to the earliest pending timer's deadline
// and fires it (and every other timer due then). It reports false, and
// leaves the clock alone, when no timer is pending.
func (c *Clock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	next := c.timers[0].at
	for _, t := range c.timers[1:] {
		if t.at.Before(next) {
			next = t.at
		}
	}
	c.setLocked(next)
	return true
}

type timer struct {
	c     *Clock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
