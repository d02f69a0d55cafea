package outage

import "time"

// Mode is the mode of an outage store. Its values are those of the root's
// Mode, which converts to and from it: Local is the root's ModeLocal, and so
// on.
type Mode int

// The modes, in the root's order.
const (
	// Local: the zero value; as an outage mode (Options.Mode) it means
	// Fallback.
	Local Mode = iota
	// Shared: buckets live in Redis, shared by the fleet.
	Shared
	// Fallback: Redis is unreachable; each rule runs in a local token
	// bucket sized to this replica's share of the fleet.
	Fallback
	// FailOpen: Redis is unreachable; requests go at once, unthrottled.
	FailOpen
	// FailClosed: Redis is unreachable; requests fail with
	// store.ErrUnavailable.
	FailClosed
)

// Change reports a switch of modes: from Shared to the outage mode when a
// call fails or times out, and back when a probe finds Redis answering
// again. The root turns it into its ModeChange.
type Change struct {
	From, To Mode
	At       time.Time // by the store's clock
	// Err is the failure that caused a switch to an outage mode; nil on
	// the way back.
	Err error
}
