package lease

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// Local is an in-process semaphore per cap key with the semantics of the
// Redis store: all or none across the caps of a request, waiters served in
// order of effective arrival (strict priority within one aging step, FIFO
// within a level), deadline-aware. A waiter costs no goroutine: it sleeps
// on its own channel and one timer of the Clock. It is safe for concurrent
// use; the zero value is not usable (use NewLocal).
type Local struct {
	clk   Clock
	aging time.Duration
	// limit returns the limit in force for c; the Fallback sizes its
	// local semaphore with it. Called under mu: it must not block.
	limit func(c Cap) int

	mu   sync.Mutex
	keys map[string]*localKey
	seq  uint64
	// last is the latest arrival: a clock that jumps backwards does not
	// let a new request overtake the waiters that came before it.
	last time.Time
	// adapt holds the keys whose cap Lower or Observe changed (adaptive.go).
	adapt      map[string]*adaptive
	climb      time.Duration
	observeTTL time.Duration
}

// localKey is one cap key's state.
type localKey struct {
	held    int
	waiters []*localWaiter // in service order: (score, seq) ascending
}

// localWaiter is one waiting Acquire.
type localWaiter struct {
	caps    []Cap
	score   int64 // effective arrival, ns of the Clock
	seq     uint64
	granted bool
	ready   chan struct{} // closed when granted
}

// LocalOption configures NewLocal.
type LocalOption interface{ applyLocal(*Local) }

type localOptionFunc func(*Local)

func (f localOptionFunc) applyLocal(l *Local) { f(l) }

// WithClock sets the Local store's clock, which times the aging of waiters
// and their maxWait. A nil Clock means the system clock, the default.
func WithClock(c Clock) LocalOption {
	return localOptionFunc(func(l *Local) {
		if c != nil {
			l.clk = c
		}
	})
}

// WithLocalAging sets the Local store's aging step (see Priority). If
// d ≤ 0, DefaultAging is used.
func WithLocalAging(d time.Duration) LocalOption {
	return localOptionFunc(func(l *Local) {
		if d > 0 {
			l.aging = d
		}
	})
}

// NewLocal returns an empty local store.
func NewLocal(opts ...LocalOption) *Local {
	l := &Local{
		clk: systemClock{}, aging: DefaultAging, limit: func(c Cap) int { return c.Limit },
		keys: map[string]*localKey{}, adapt: map[string]*adaptive{},
		climb: DefaultClimb, observeTTL: DefaultObserveTTL,
	}
	for _, o := range opts {
		o.applyLocal(l)
	}
	return l
}

// Acquire takes one lease in every cap of caps, all or none (see Store).
// It fails with ctx's error when ctx ends first, and with a *TimeoutError
// when maxWait passes first (at once when maxWait ≤ 0).
func (l *Local) Acquire(ctx context.Context, caps []Cap, p Priority, maxWait time.Duration) (*Lease, error) {
	return l.acquire(ctx, caps, p, maxWait, nil)
}

// errAborted ends a local wait whose abort channel closed: the Fallback's
// Redis came back, and the request should wait there instead.
var errAborted = errors.New("throttle: concurrency cap: local wait aborted")

// acquire is Acquire, ended with errAborted when abort closes first (a
// nil abort never does).
func (l *Local) acquire(ctx context.Context, caps []Cap, p Priority, maxWait time.Duration, abort <-chan struct{}) (*Lease, error) {
	if err := checkCaps(caps); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	caps = append([]Cap(nil), caps...)
	start := l.clk.Now()
	w := &localWaiter{caps: caps, ready: make(chan struct{})}

	l.mu.Lock()
	if start.After(l.last) {
		l.last = start
	}
	w.score = l.last.UnixNano() - int64(p.clamp())*int64(l.aging)
	l.seq++
	w.seq = l.seq
	for _, c := range caps {
		l.key(c.Key).insert(w)
	}
	l.grant(w)
	if w.granted {
		l.mu.Unlock()
		return l.lease(caps), nil
	}
	if maxWait <= 0 {
		blocked := l.blocking(w)
		l.remove(w)
		l.mu.Unlock()
		return nil, &TimeoutError{Rule: blocked, Waited: 0}
	}
	l.mu.Unlock()

	timer := l.clk.NewTimer(maxWait)
	defer timer.Stop()
	var err error
wait:
	for {
		// A lowered cap climbs with time alone: the waiter looks again
		// when the cap of one of its keys next changes.
		var change <-chan time.Time
		l.mu.Lock()
		next, ok := l.nextChange(caps)
		l.mu.Unlock()
		var ct clockTimer
		if ok {
			ct = l.clk.NewTimer(max(next.Sub(l.clk.Now()), time.Nanosecond))
			change = ct.C()
		}
		select {
		case <-w.ready:
			stopTimer(ct)
			return l.lease(caps), nil
		case <-ctx.Done():
			err = ctx.Err()
		case <-abort:
			err = errAborted
		case <-timer.C():
		case <-change:
			l.mu.Lock()
			l.dispatch(caps)
			l.mu.Unlock()
			continue
		}
		stopTimer(ct)
		break wait
	}
	l.mu.Lock()
	if w.granted {
		// Granted as the wait ended: the wait's end wins, and the leases go
		// back to the next waiters.
		l.mu.Unlock()
		l.lease(caps).Release()
		if err != nil {
			return nil, err
		}
		return nil, &TimeoutError{Rule: caps[0].Rule, Waited: max(0, l.clk.Now().Sub(start))}
	}
	blocked := l.blocking(w)
	l.remove(w)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return nil, &TimeoutError{Rule: blocked, Waited: max(0, l.clk.Now().Sub(start))}
}

// Held returns the leases held under key, for tests and metrics.
func (l *Local) Held(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k, ok := l.keys[key]; ok {
		return k.held
	}
	return 0
}

// lease returns the Lease of caps, granted.
func (l *Local) lease(caps []Cap) *Lease {
	return newLease(caps, nil, &localPart{l: l, caps: caps})
}

// localPart is a Local store's share of a lease.
type localPart struct {
	l    *Local
	caps []Cap
}

func (p *localPart) release() { p.l.put(p.caps) }

// force takes a lease in every cap whatever the caps' state, ahead of every
// waiter: the Fallback counts with it the Redis leases still held when it
// switches to the local store.
func (l *Local) force(caps []Cap) part {
	l.mu.Lock()
	for _, c := range caps {
		l.key(c.Key).held++
	}
	l.mu.Unlock()
	return &localPart{l: l, caps: caps}
}

// put returns one lease in every cap and grants what that frees.
func (l *Local) put(caps []Cap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range caps {
		l.key(c.Key).held--
	}
	l.dispatch(caps)
}

// key returns key's state, made on first use. Called under mu.
func (l *Local) key(key string) *localKey {
	k, ok := l.keys[key]
	if !ok {
		k = &localKey{}
		l.keys[key] = k
	}
	return k
}

// eligible reports whether w is within the first (limit − held) waiters of
// every one of its caps. Called under mu.
func (l *Local) eligible(w *localWaiter) bool {
	return l.blocking(w) == ""
}

// blocking returns the rule of w's first cap that w cannot take now, or ""
// when it can take them all. Called under mu.
func (l *Local) blocking(w *localWaiter) string {
	for _, c := range w.caps {
		k := l.keys[c.Key]
		free := l.capOf(c) - k.held
		if k.rank(w) >= free {
			return c.Rule
		}
	}
	return ""
}

// grant gives w its leases if it is eligible. Called under mu.
func (l *Local) grant(w *localWaiter) {
	if w.granted || !l.eligible(w) {
		return
	}
	for _, c := range w.caps {
		k := l.keys[c.Key]
		k.drop(w)
		k.held++
	}
	w.granted = true
	close(w.ready)
}

// remove takes w out of its caps' queues, dropping idle keys, and grants
// what its leaving frees. Called under mu.
func (l *Local) remove(w *localWaiter) {
	for _, c := range w.caps {
		l.keys[c.Key].drop(w)
	}
	if !w.granted {
		l.dispatch(w.caps)
	}
}

// dispatch grants the waiters of caps' keys that became eligible, in
// service order, until none is, and forgets idle keys. Called under mu.
func (l *Local) dispatch(caps []Cap) {
	for again := true; again; {
		again = false
		for _, c := range caps {
			k := l.keys[c.Key]
			if k == nil {
				continue
			}
			for i := 0; i < len(k.waiters) && i < l.capOf(c)-k.held; i++ {
				w := k.waiters[i]
				if l.eligible(w) {
					l.grant(w)
					again = true
					break
				}
			}
		}
	}
	for _, c := range caps {
		if k := l.keys[c.Key]; k != nil && k.held == 0 && len(k.waiters) == 0 {
			delete(l.keys, c.Key)
		}
	}
}

// insert puts w in service order.
func (k *localKey) insert(w *localWaiter) {
	i := sort.Search(len(k.waiters), func(i int) bool { return w.before(k.waiters[i]) })
	k.waiters = append(k.waiters, nil)
	copy(k.waiters[i+1:], k.waiters[i:])
	k.waiters[i] = w
}

// rank returns w's index in service order (len if absent).
func (k *localKey) rank(w *localWaiter) int {
	for i, x := range k.waiters {
		if x == w {
			return i
		}
	}
	return len(k.waiters)
}

// drop removes w from the queue.
func (k *localKey) drop(w *localWaiter) {
	if i := k.rank(w); i < len(k.waiters) {
		k.waiters = append(k.waiters[:i], k.waiters[i+1:]...)
	}
}

// before orders waiters by effective arrival, then arrival.
func (w *localWaiter) before(x *localWaiter) bool {
	if w.score != x.score {
		return w.score < x.score
	}
	return w.seq < x.seq
}
