package middleware

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/lease"
)

// The concurrency caps (Rule.Concurrency): in process, a semaphore per
// partition (semaphores); with WithRedis, leases shared by the fleet
// (internal/lease, as the Transport's), held while the handler runs.

// acquireLeases takes a lease in every cap of caps, all or none, without
// waiting, for decision d. It reports false when d was refused: a cap was
// full (ReasonConcurrency), or the lease store failed and the outage mode
// fails closed (ReasonUnavailable). Any other failure admits the request
// without a lease: a Redis outage must not refuse every client (the
// fallback store runs this replica's share while Redis is unreachable, so
// that only comes from a failure it does not cover).
func (l *Limiter) acquireLeases(ctx context.Context, d *Decision, caps []semSlot) (func(), bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	lc := make([]lease.Cap, len(caps))
	for i, c := range caps {
		lc[i] = lease.Cap{Key: c.key, Rule: d.Rules[c.rule].Name, Limit: c.cap}
	}
	ls, err := l.leases.Acquire(ctx, lc, lease.Normal, 0)
	if err == nil {
		return ls.Release, true
	}
	var te *lease.TimeoutError
	if errors.As(err, &te) {
		i := 0
		for j, c := range caps {
			if d.Rules[c.rule].Name == te.Rule {
				i = j
				break
			}
		}
		refuse(d, caps[i].rule, ReasonConcurrency, time.Second)
		return noRelease, false
	}
	if l.failClosed || ctx.Err() != nil {
		reason := ReasonUnavailable
		if ctx.Err() != nil {
			reason = ReasonCanceled
		}
		refuse(d, caps[0].rule, reason, time.Second)
		d.Err = err
		return noRelease, false
	}
	return noRelease, true
}

// anyConcurrency reports whether a rule of tiers has a Concurrency.
func anyConcurrency(tiers map[string]*tier) bool {
	for _, t := range tiers {
		for _, c := range t.rules {
			if c.Concurrency > 0 {
				return true
			}
		}
	}
	return false
}

// semaphores holds the concurrency caps of this process: the requests of
// each partition in the handler, by key.
type semaphores struct {
	mu sync.Mutex
	n  map[string]int
}

// semSlot is one cap a request needs: its key, the cap, the index of its
// rule in the decision, and after acquire the requests in flight.
type semSlot struct {
	key      string
	cap      int
	rule     int
	inFlight int
}

// acquire takes a slot in every cap of slots, all or none, and returns -1,
// or the index of the first full one (taking nothing).
func (s *semaphores) acquire(slots []semSlot) int {
	if len(slots) == 0 {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range slots {
		slots[i].inFlight = s.n[slots[i].key]
		if slots[i].inFlight >= slots[i].cap {
			return i
		}
	}
	for i := range slots {
		s.n[slots[i].key]++
		slots[i].inFlight++
	}
	return -1
}

// release gives back the slots acquire took.
func (s *semaphores) release(slots []semSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range slots {
		if n := s.n[sl.key] - 1; n > 0 {
			s.n[sl.key] = n
		} else {
			delete(s.n, sl.key)
		}
	}
}
