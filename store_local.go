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
	caps      map[string]rateCap
	counts    map[string]int64 // 1 + the units reported sent under a cap in force (see store.limit)
	sweepSize int              // sweep when the map reaches this size
	sweptAt   int64            // time of the last sweep
}

func newLocalStore(c Clock) *localStore {
	return &localStore{
		clock:     c,
		tats:      make(map[string]int64),
		caps:      make(map[string]rateCap),
		counts:    make(map[string]int64),
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
	// prev and booked share one allocation: it is most of what a booking
	// costs beside the lock.
	tats := make([]int64, 2*len(bs))
	r.prev, r.booked = tats[:len(bs):len(bs)], tats[len(bs):]
	if len(s.caps) > 0 {
		r.counts = make([]int64, len(bs))
	}
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
		if r.counts != nil && s.cappedLocked(b.key, now) {
			s.counts[b.key] += b.sent
			r.counts[i] = s.counts[b.key]
		}
	}
	return r, nil
}

// cappedLocked reports whether a cap is in force for key at now, dropping
// one that has ended (and its count, as Redis does). s.mu must be held.
func (s *localStore) cappedLocked(key string, now int64) bool {
	a, ok := s.caps[key]
	if ok && a.until <= now {
		delete(s.caps, key)
		delete(s.counts, key)
		return false
	}
	return ok
}

func (s *localStore) limit(_ context.Context, b bucket, c capSpec) error {
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cappedLocked(b.key, now) {
		s.counts[b.key] = 1 // as limit.lua: a counted bucket never reports 0
	}
	s.caps[b.key] = rateCap{rate0: c.rate, t0: now, slope: c.slope, until: satAdd(now, int64(max(c.span, 1)))}
	return nil
}

// held is always 0: in one process, listen holds the waiters itself.
func (s *localStore) held(context.Context, []bucket) (time.Duration, error) { return 0, nil }

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
// rule's, or slower while a cap holds the bucket back (see store.limit).
// s.mu must be held.
func (s *localStore) intervalLocked(b bucket, now int64) int64 {
	iv := int64(b.interval)
	if len(s.caps) > 0 {
		if a, ok := s.caps[b.key]; ok {
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
	caps := make(map[string]rateCap)
	counts := make(map[string]int64)
	for k, a := range s.caps {
		if a.until > now {
			caps[k], counts[k] = a, s.counts[k]
		}
	}
	s.caps, s.counts = caps, counts
	s.sweepSize = max(2*len(live), sweepMinSize)
	s.sweptAt = now
}

// len returns the number of buckets held, for tests.
func (s *localStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tats)
}
