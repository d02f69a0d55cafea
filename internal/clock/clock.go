// Package clock holds the timer interface shared by package throttle and its
// test clocks, so that a test clock need not import throttle.
package clock

import "time"

// Timer is the part of [time.Timer] a Transport uses.
type Timer interface {
	// C returns the channel on which the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so.
	Stop() bool
}
