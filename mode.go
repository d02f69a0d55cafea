package throttle

import (
	"fmt"
	"time"

	"github.com/throttlekit/throttle/internal/outage"
)

// Mode is how a Transport decides when requests may go. The zero value is
// ModeLocal, the mode of a Transport without [WithRedis]. A Mode is a plain
// value, safe to copy and compare from any goroutine.
type Mode int

const (
	// ModeLocal: buckets live in this process only (no [WithRedis]).
	ModeLocal Mode = iota
	// ModeShared: buckets live in Redis, shared by the fleet.
	ModeShared
	// ModeFallback: Redis is unreachable; each rule runs in process,
	// sized to this replica's share of the fleet: a leaky or token bucket
	// rule in a local token bucket, a window rule in its own algorithm.
	// The default outage mode.
	ModeFallback
	// ModeFailOpen: Redis is unreachable; requests go at once, unthrottled.
	ModeFailOpen
	// ModeFailClosed: Redis is unreachable; requests fail with
	// [ErrStoreUnavailable].
	ModeFailClosed
)

func (m Mode) String() string {
	switch m {
	case ModeLocal:
		return "local"
	case ModeShared:
		return "shared"
	case ModeFallback:
		return "fallback"
	case ModeFailOpen:
		return "fail-open"
	case ModeFailClosed:
		return "fail-closed"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ModeChange reports a Transport switching modes: from [ModeShared] to its
// outage mode when a Redis call fails or times out, and back when a probe
// finds Redis answering again. The function given to [WithOnModeChange]
// gets each one by value; the zero ModeChange (from ModeLocal to
// ModeLocal) is never reported.
type ModeChange struct {
	From, To Mode
	At       time.Time // by the Transport's clock
	// Err is the failure that caused a switch to an outage mode; nil on the
	// way back. It never holds a partition key: bucket keys are hashed.
	Err error
}

// Mode returns the mode the Transport is in now: [ModeLocal] without
// [WithRedis] (and for the zero Transport), otherwise [ModeShared] or the outage mode (see
// [WithOutageMode]). It is safe for concurrent use; [WithOnModeChange]
// reports each change as it happens.
func (t *Transport) Mode() Mode {
	if f, ok := t.store.(*outage.Store); ok {
		return Mode(f.Mode())
	}
	return ModeLocal
}
