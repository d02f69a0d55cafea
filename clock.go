package throttle

import (
	"time"

	"github.com/throttlekit/throttle/internal/clock"
)

// Clock tells the time and makes timers. The Transport uses the system clock
// unless [WithClock] injects another, which is how tests run deterministically.
// A Clock must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of [time.Timer] a Transport uses: C() returns the
// channel on which the timer fires, and Stop() prevents the firing and
// reports whether it did so.
type Timer = clock.Timer

// systemClock is the Clock of package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
