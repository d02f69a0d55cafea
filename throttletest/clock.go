package throttletest

import (
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

// FakeClock is a manual [throttle.Clock] for deterministic tests: time
// moves only when the test calls [FakeClock.Advance], [FakeClock.Set] or
// [FakeClock.AdvanceToNext], and timers fire then, earliest first. Give the
// same FakeClock to the server ([WithClock]) and to the Transport
// ([throttle.WithClock]) and an hour of a provider's window passes in
// milliseconds, with no sleeping. It is the clock the module's own tests
// run on (internal/fakeclock), exported.
//
// Create one with [NewFakeClock]; the zero FakeClock is not usable. It is
// safe for concurrent use.
type FakeClock struct{ c *fakeclock.Clock }

var _ throttle.Clock = (*FakeClock)(nil)

// NewFakeClock returns a FakeClock set to start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{c: fakeclock.New(start)} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time { return c.c.Now() }

// NewTimer returns a timer that fires once the clock reaches Now()+d; one
// of d ≤ 0 has fired already.
func (c *FakeClock) NewTimer(d time.Duration) throttle.Timer { return c.c.NewTimer(d) }

// Advance moves the clock by d (backwards if d < 0) and fires the timers
// that are due.
func (c *FakeClock) Advance(d time.Duration) { c.c.Advance(d) }

// Set moves the clock to t and fires the timers that are due, earliest
// first.
func (c *FakeClock) Set(t time.Time) { c.c.Set(t) }

// AdvanceToNext moves the clock to the earliest pending timer's deadline
// and fires it (and every other timer due then). It reports false, and
// leaves the clock alone, when no timer is pending.
func (c *FakeClock) AdvanceToNext() bool { return c.c.AdvanceToNext() }

// Timers returns the number of pending timers.
func (c *FakeClock) Timers() int { return c.c.Timers() }

// WaitTimers blocks until at least n timers are pending, or until stop
// returns true; stop is called with the clock's lock held, whenever a
// timer is made, and after [FakeClock.Wake]. It is how a test driver
// learns that every goroutine it runs is asleep.
func (c *FakeClock) WaitTimers(n int, stop func() bool) { c.c.WaitTimersOr(n, stop) }

// Wake makes every [FakeClock.WaitTimers] check its condition again: call
// it when a goroutine the driver counts has finished.
func (c *FakeClock) Wake() { c.c.Wake() }

// systemClock is the clock of package time, the default of [WithClock].
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) throttle.Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
