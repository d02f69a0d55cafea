package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/clock"
)

// Cap is one concurrency cap a request needs: at most Limit leases at once
// under Key. Its zero value is invalid (Limit < 1); Acquire rejects it with
// ErrInvalidCap. A Cap is a plain value, safe to copy and share.
type Cap struct {
	// Key names the bucket. It is unique per bucket and already free of
	// secrets (hashed); a store prefixes it (the Redis store with
	// "throttle:{ns}:lease:").
	Key string
	// Rule is the name of the rule the cap belongs to, for errors.
	Rule string
	// Limit is the cap: at most Limit leases at once, Limit ≥ 1.
	Limit int
}

// Priority orders waiting requests: higher first. A waiting request ages,
// so that a low one never starves: its effective arrival is its arrival
// minus Priority × the aging step (see WithAging), and waiters are served
// in order of effective arrival, earliest first. The zero value is Normal.
// Values outside [Low, High] are clamped.
type Priority int

// The priority levels.
const (
	// Low is for background work: it yields to Normal requests that
	// arrived less than one aging step after it.
	Low Priority = -1
	// Normal is the default.
	Normal Priority = 0
	// High is for interactive requests: it goes ahead of Normal requests
	// that arrived less than one aging step before it, and of Low ones
	// that arrived less than two steps before.
	High Priority = 1
)

// clamp returns p within [Low, High].
func (p Priority) clamp() Priority {
	return min(max(p, Low), High)
}

// DefaultAging is the default aging step (see Priority and WithAging): one
// second, longer than a typical API call, so that priority decides among
// the requests of one burst, and short enough that a Low request waits at
// most two seconds more than it would at High.
const DefaultAging = time.Second

// Store is what the root's Transport consumes: all-or-none acquisition of
// leases under concurrency caps. *Local, *Redis and *Fallback implement it.
type Store interface {
	// Acquire takes one lease in every cap of caps, all or none, waiting
	// without polling until it can, until ctx is done, or until maxWait
	// passes. maxWait ≤ 0 means no waiting: a request that cannot take its
	// leases at once fails with a *TimeoutError. On failure nothing is held
	// and no ticket is left behind.
	Acquire(ctx context.Context, caps []Cap, p Priority, maxWait time.Duration) (*Lease, error)
}

var (
	_ Store = (*Local)(nil)
	_ Store = (*Redis)(nil)
	_ Store = (*Fallback)(nil)
)

// Errors. Each is matched with errors.Is.
var (
	// ErrTimeout is wrapped by the *TimeoutError of a request whose leases
	// were not free within its maxWait.
	ErrTimeout = errors.New("throttle: concurrency cap: no lease within the maximum wait")
	// ErrInvalidCap reports caps that cannot be acquired: none, a Limit
	// below 1 or the same Key twice.
	ErrInvalidCap = errors.New("throttle: concurrency cap: invalid cap")
	// ErrUnavailable is wrapped by the *UnavailableError of a Redis call
	// that failed or timed out.
	ErrUnavailable = errors.New("throttle: concurrency cap: redis unavailable")
	// ErrClosed reports an Acquire on a closed store.
	ErrClosed = errors.New("throttle: concurrency cap: store closed")
)

// TimeoutError is the error of a request that waited its maxWait for its
// leases in vain. It wraps ErrTimeout and, for errors.Is,
// context.DeadlineExceeded too.
type TimeoutError struct {
	// Rule is the rule of the first cap that was not free.
	Rule string
	// Waited is how long the request waited.
	Waited time.Duration
}

// Error names the rule and the wait.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("throttle: concurrency cap of rule %q: no lease within %v", e.Rule, e.Waited)
}

// Unwrap returns ErrTimeout and context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }

// UnavailableError is the error of a Redis call that failed or timed out;
// it wraps ErrUnavailable and the cause.
type UnavailableError struct {
	// Op names the script or command that failed.
	Op string
	// Err is the cause.
	Err error
}

// Error names the call and its cause.
func (e *UnavailableError) Error() string {
	return "throttle: concurrency cap: redis " + e.Op + ": " + e.Err.Error()
}

// Unwrap returns ErrUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Clock tells the time and makes timers; fakeclock.Clock satisfies it. The
// local store waits on its timers; a nil Clock means the system clock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) clock.Timer
}

// systemClock is the Clock of package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) clock.Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

// part is one store's share of a lease: the leases one store granted for
// it. Its release must not block long and is called at most once.
type part interface {
	release()
}

// Lease is the leases one request holds, one per cap, from one Acquire.
// Release gives them back. It is safe for concurrent use; the zero value
// is not usable (a Lease comes from Acquire).
type Lease struct {
	caps   []Cap
	tokens []int64 // fencing tokens, in caps order; nil for local leases
	lost   chan struct{}

	mu       sync.Mutex
	released bool
	parts    []part // releases in order; shadows added by the Fallback
	lostOnce sync.Once
}

// newLease returns a lease of caps granted by first.
func newLease(caps []Cap, tokens []int64, first part) *Lease {
	return &Lease{caps: caps, tokens: tokens, lost: make(chan struct{}), parts: []part{first}}
}

// Release gives the leases back. It is idempotent and safe from any
// goroutine. A Redis release goes out on a goroutine of its own, bounded
// by the store's call timeout; Release waits for it at most 5 ms, so that
// it reaches Redis before the caller's next work.
func (l *Lease) Release() {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	parts := l.parts
	l.parts = nil
	l.mu.Unlock()
	for _, p := range parts {
		p.release()
	}
}

// Lost returns a channel closed when the lease expired unrenewed (the Redis
// store could not renew it within its TTL, or Redis no longer knows its
// token): another request may then hold the slot. A lease of the Local
// store is never lost; a Fallback lease taken locally can be once it was
// registered in Redis (see the package doc), as can a Redis lease held
// through an outage even though the local semaphore still counts it. The
// channel is not closed by Release.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Tokens returns the fencing tokens of a Redis lease, one per cap in the
// order of the caps given to Acquire: each is larger than every token
// granted before it under the same cap key. A local lease has none (nil).
// The slice is a copy.
func (l *Lease) Tokens() []int64 { return append([]int64(nil), l.tokens...) }

// Caps returns the caps the lease was acquired for (a copy).
func (l *Lease) Caps() []Cap { return append([]Cap(nil), l.caps...) }

// markLost closes Lost once.
func (l *Lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// addPart adds a part released with the lease; if the lease is already
// released, it releases p at once and reports false.
func (l *Lease) addPart(p part) bool {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		p.release()
		return false
	}
	l.parts = append(l.parts, p)
	l.mu.Unlock()
	return true
}

// isReleased reports whether Release was called.
func (l *Lease) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// checkCaps validates caps: at least one, each Limit ≥ 1, keys distinct.
func checkCaps(caps []Cap) error {
	if len(caps) == 0 {
		return fmt.Errorf("%w: no caps", ErrInvalidCap)
	}
	for i, c := range caps {
		if c.Limit < 1 {
			return fmt.Errorf("%w: rule %q key %q: limit %d < 1", ErrInvalidCap, c.Rule, c.Key, c.Limit)
		}
		for _, d := range caps[:i] {
			if d.Key == c.Key {
				return fmt.Errorf("%w: key %q twice", ErrInvalidCap, c.Key)
			}
		}
	}
	return nil
}
