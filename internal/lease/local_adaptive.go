package lease

import (
	"context"
	"time"

	"github.com/throttlekit/throttle/internal/clock"
)

// clockTimer is a Clock's timer, nil for none.
type clockTimer = clock.Timer

// stopTimer stops t unless it is nil.
func stopTimer(t clockTimer) {
	if t != nil {
		t.Stop()
	}
}

// adaptive is a key's adaptive cap in a Local store: the model of
// lower.lua (see the package doc), in process.
type adaptive struct {
	low         int
	lowAt       time.Time // zero: not lowered
	others      int
	othersUntil time.Time
}

// at returns the cap of limit at now, and when it next changes (ok false if
// it does not).
func (a *adaptive) at(limit int, now time.Time, climb time.Duration) (c int, next time.Time, ok bool) {
	c = limit
	if !a.lowAt.IsZero() {
		steps := int(max(0, now.Sub(a.lowAt)) / climb)
		if a.low+steps < c {
			c = a.low + steps
			next, ok = a.lowAt.Add(time.Duration(steps+1)*climb), true
		}
	}
	if now.Before(a.othersUntil) && limit-a.others < c {
		c = limit - a.others
		if !ok || a.othersUntil.Before(next) {
			next, ok = a.othersUntil, true
		}
	}
	return max(c, 1), next, ok
}

// capOf returns the cap in force for c: the store's limit for it (the
// Fallback's share), lowered by Lower and Observe. Called under mu.
func (l *Local) capOf(c Cap) int {
	limit := l.limit(c)
	a := l.adapt[c.Key]
	if a == nil {
		return limit
	}
	n, _, ok := a.at(c.Limit, l.clk.Now(), l.climb)
	if !ok && n >= c.Limit {
		delete(l.adapt, c.Key) // back to the limit for good
	}
	return min(limit, n)
}

// nextChange returns the earliest time the cap of one of caps changes.
// Called under mu.
func (l *Local) nextChange(caps []Cap) (time.Time, bool) {
	var next time.Time
	found := false
	now := l.clk.Now()
	for _, c := range caps {
		a := l.adapt[c.Key]
		if a == nil {
			continue
		}
		if _, t, ok := a.at(c.Limit, now, l.climb); ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	return next, found
}

// withLocalClimb sets the Local store's climb period (see Local.lower). If
// d ≤ 0, DefaultClimb is used.
func withLocalClimb(d time.Duration) LocalOption {
	return localOptionFunc(func(l *Local) {
		if d > 0 {
			l.climb = d
		}
	})
}

// lower is Redis.Lower for this process alone: the cap of c.Key drops to
// its holders minus one (floor 1, never above the cap in force) and climbs
// back by one per climb period (withLocalClimb). It returns the cap after
// the call; the error is always nil. The Fallback's local semaphore takes
// refusals with it while Redis is down. It is not exported: the root
// adapts the caps of the stores that have Lower and Observe, and whether
// a Transport without Redis should is the root's decision.
func (l *Local) lower(_ context.Context, c Cap) (int, error) {
	if err := checkCaps([]Cap{c}); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	held := 0
	if k := l.keys[c.Key]; k != nil {
		held = k.held
	}
	before := l.capOf(c)
	a := l.adapt[c.Key]
	if a == nil {
		a = &adaptive{}
		l.adapt[c.Key] = a
	}
	a.low, a.lowAt = max(1, min(before, held-1)), l.clk.Now()
	return l.capOf(c), nil
}

// observe is Redis.Observe for this process alone: of the server's count
// of requests in flight, those beyond this key's holders are others', and
// for DefaultObserveTTL the cap is c.Limit minus them (floor 1). It
// returns the cap after the call; the error is always nil.
func (l *Local) observe(_ context.Context, c Cap, serverCount int) (int, error) {
	if err := checkCaps([]Cap{c}); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	held := 0
	if k := l.keys[c.Key]; k != nil {
		held = k.held
	}
	a := l.adapt[c.Key]
	if a == nil {
		a = &adaptive{}
		l.adapt[c.Key] = a
	}
	a.others, a.othersUntil = max(0, serverCount-held), l.clk.Now().Add(l.observeTTL)
	l.dispatch([]Cap{c}) // the cap may have risen
	return l.capOf(c), nil
}
