package outage

import (
	"sync"
	"time"
)

// breaker tracks the health of the shared store. It is closed while Redis
// answers; the first failure opens it, because a Redis that timed out once
// will most likely time out for the next request too, and each such request
// would wait the full timeout. While open, one request per probe interval
// is let through as a half-open probe: its success closes the breaker, its
// failure keeps it open for another interval. Every other request goes
// straight to the outage mode, so an outage costs at most one timeout per
// probe interval.
//
// It is safe for concurrent use. It never calls user code: transitions are
// handed to the notifier, which reports them after every lock is released.
type breaker struct {
	probeEvery time.Duration
	outage     Mode      // the Mode reported while open
	notify     *notifier // receives every transition

	mu        sync.Mutex
	open      bool
	probing   bool      // a half-open probe is in flight
	nextProbe time.Time // when open: the earliest time of the next probe
	cause     error     // when open: the failure that opened it, or the last probe's
}

func newBreaker(probeEvery time.Duration, outage Mode, n *notifier) *breaker {
	return &breaker{probeEvery: probeEvery, outage: outage, notify: n}
}

// allow reports whether a request at now should call Redis, and whether that
// call is the half-open probe (whose outcome must be reported with probe
// set). When it returns false, cause is the failure that keeps it open.
func (b *breaker) allow(now time.Time) (try, probe bool, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true, false, nil
	}
	if b.probing || now.Before(b.nextProbe) {
		return false, false, b.cause
	}
	b.probing = true
	return true, true, nil
}

// closed reports whether Redis is believed healthy. Calls that must not
// probe (refunds, pauses) use it.
func (b *breaker) closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.open
}

// success records a call that Redis answered, and reports whether it
// closed the breaker (the return to the shared bucket). Only the probe's
// success closes an open breaker: a call that started before the outage
// and answered late says little about Redis now.
func (b *breaker) success(now time.Time, probe bool) (closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !probe {
		return false
	}
	b.probing = false
	if !b.open {
		return false
	}
	b.open, b.cause = false, nil
	b.notify.push(Change{From: b.outage, To: Shared, At: now})
	return true
}

// release ends a probe that proved nothing (its caller gave up), so that
// the next request may probe.
func (b *breaker) release(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// failure records a call that failed or timed out: it opens the breaker (or
// keeps it open) until now plus the probe interval.
func (b *breaker) failure(now time.Time, probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	if b.open && !probe {
		// A call that started before the breaker opened: the outage is
		// already known, and the probe schedule stands.
		return
	}
	b.nextProbe = now.Add(b.probeEvery)
	b.cause = err
	if !b.open {
		b.open = true
		b.notify.push(Change{From: Shared, To: b.outage, At: now, Err: err})
	}
}

// mode returns the Mode the breaker's state stands for.
func (b *breaker) mode() Mode {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return b.outage
	}
	return Shared
}

// notifier delivers mode changes to the user's callback in the order they
// happened, on a goroutine of its own that runs only while changes are
// pending: no request ever waits for the callback, no lock is held while it
// runs, and nothing is left running between outages.
type notifier struct {
	fn func(Change) // nil: changes are dropped

	mu      sync.Mutex
	pending []Change
	running bool
}

// push queues c. It may be called under the caller's lock: it only appends,
// and starts the delivering goroutine (which takes no lock of the caller's).
func (n *notifier) push(c Change) {
	if n == nil || n.fn == nil {
		return
	}
	n.mu.Lock()
	n.pending = append(n.pending, c)
	start := !n.running
	n.running = true
	n.mu.Unlock()
	if start {
		go n.deliver()
	}
}

// deliver calls fn for each pending change, oldest first, and returns when
// none is left.
func (n *notifier) deliver() {
	for {
		n.mu.Lock()
		if len(n.pending) == 0 {
			n.running = false
			n.mu.Unlock()
			return
		}
		c := n.pending[0]
		n.pending = n.pending[1:]
		n.mu.Unlock()
		n.fn(c)
	}
}
