package throttle

import (
	"time"

	"github.com/throttlekit/throttle/internal/clock"
)

// Clock tells the time and makes timers. The Transport uses the system clock
// unless [WithClock] injects another, which is how tests run deterministically;
// WithClock(nil) means the system clock too.
//
// A Clock must be safe for concurrent use: the Transport calls it from the
// goroutines of concurrent requests. NewTimer must return a non-nil
// [Timer]; the Transport asks for timers of d > 0 only.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of [time.Timer] a Transport uses: C() returns the
// channel on which the timer fires, and Stop() prevents the firing and
// reports whether it did so. A Clock's NewTimer returns one.
//
// The Transport uses each Timer from the one goroutine that made it, and
// drops it once it fired or was stopped; a Timer need not be safe for
// concurrent use. It has no useful zero value: the interface is nil.
type Timer = clock.Timer

// systemClock is the Clock of package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
