package throttle

import (
	"context"
	"sync"
	"time"
)

// Idle buckets are dropped by sweeps. A bucket whose TAT has passed equals a
// new one, so dropping it never changes a decision. A sweep copies the live
// buckets into a new map (Go maps do not shrink) and runs when the map has
// doubled since the last sweep, or sweepEvery after it, whichever comes
// first: its O(n) cost is spread over at least n/2 insertions or a minute.
const (
	sweepEvery   = time.Minute
	sweepMinSize = 1024
)

// localStore keeps buckets in this process, guarded by one mutex.
type localStore struct {
	clock Clock

	mu        sync.Mutex
	tats      map[string]int64 // bucket key → TAT, Unix nanoseconds
	adapts    map[string]adaptation
	sweepSize int   // sweep when the map reaches this size
	sweptAt   int64 // time of the last sweep
}

func newLocalStore(c Clock) *localStore {
	return &localStore{
		clock:     c,
		tats:      make(map[string]int64),
		adapts:    make(map[string]adaptation),
		sweepSize: sweepMinSize,
		sweptAt:   c.Now().UnixNano(),
	}
}

func (s *localStore) reserve(_ context.Context, bs []bucket, maxWait time.Duration) (reservation, error) {
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeSweep(now)

	// The request departs when its slowest bucket lets it. Each other
	// bucket is booked at the request's earliest time in it when the
	// request leaves within that bucket's lateness tolerance of it; further
	// ahead, the bucket is not booked now but deferred (see reservation).
	// Booking a bucket at a later time would leave its capacity before then
	// unused: a deep queue on one endpoint would hold every other endpoint
	// behind it in a shared account-wide bucket.
	depart, limiter := now, 0
	for i, b := range bs {
		if at := gcraAllowAt(s.tats[b.key], now, s.intervalLocked(b, now), b.burst, b.cost); at > depart {
			depart, limiter = at, i
		}
	}
	r := reservation{wait: time.Duration(depart - now), limiter: limiter, buckets: bs}
	if r.wait > maxWait {
		return r, nil
	}
	r.ok = true
	r.prev = make([]int64, len(bs))
	r.booked = make([]int64, len(bs))
	for i, b := range bs {
		prev := s.tats[b.key]
		iv := s.intervalLocked(b, now)
		at := gcraAllowAt(prev, now, iv, b.burst, b.cost)
		if depart-at > int64(b.lateness) {
			continue
		}
		r.prev[i] = prev
		r.booked[i] = gcraBook(prev, at, iv, b.cost)
		s.tats[b.key] = r.booked[i]
	}
	return r, nil
}

func (s *localStore) refund(_ context.Context, r *reservation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range r.buckets {
		if tat, ok := s.tats[b.key]; ok && r.booked[i] != 0 && tat == r.booked[i] {
			s.tats[b.key] = r.prev[i]
		}
	}
	return nil
}

func (s *localStore) pause(_ context.Context, bs []bucket, d time.Duration) error {
	now := s.clock.Now().UnixNano()
	until := satAdd(now, int64(max(d, 0)))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		s.tats[b.key] = gcraPause(s.tats[b.key], until, s.intervalLocked(b, now), b.burst)
	}
	return nil
}

// intervalLocked returns the emission interval in force for b at now: the
// rule's, or slower while the server's feedback holds the bucket back.
// s.mu must be held.
func (s *localStore) intervalLocked(b bucket, now int64) int64 {
	iv := int64(b.interval)
	if len(s.adapts) > 0 {
		if a, ok := s.adapts[b.key]; ok {
			iv = a.intervalAt(iv, now, 1e9)
		}
	}
	return iv
}

// maybeSweep drops idle buckets when the map has doubled or a sweep is due.
// s.mu must be held.
func (s *localStore) maybeSweep(now int64) {
	if len(s.tats) < s.sweepSize && (now-s.sweptAt < int64(sweepEvery) || len(s.tats) == 0) {
		return
	}
	live := make(map[string]int64)
	for k, tat := range s.tats {
		if tat > now {
			live[k] = tat
		}
	}
	s.tats = live
	adapts := make(map[string]adaptation)
	for k, a := range s.adapts {
		if a.until > now {
			adapts[k] = a
		}
	}
	s.adapts = adapts
	s.sweepSize = max(2*len(live), sweepMinSize)
	s.sweptAt = now
}

// len returns the number of buckets held, for tests.
func (s *localStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tats)
}
