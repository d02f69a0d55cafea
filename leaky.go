package throttle

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// This file holds the leaky bucket in this process: the generic cell rate
// algorithm (GCRA), the leaky bucket run as a queue, and the local store
// that runs it for a Transport without WithRedis (localStore). A bucket is
// one number, its theoretical arrival time (TAT): the time at which it would
// be empty if no more requests came. A request of cost c at time now conforms from
//
//	allowAt = max(TAT, now) + c·interval - burst·interval
//
// on, and booking it at its departure time d moves TAT to max(TAT, d) +
// c·interval. A bucket whose TAT has passed is indistinguishable from a new
// one, which is what lets idle buckets be dropped (local store) or expire
// (Redis). All arithmetic saturates, so huge periods or costs cannot wrap.
//
// internal/redisstore's reserve.lua runs the same steps in Redis, in
// microseconds; the root's parity tests hold both to the same decisions.

// gcraAllowAt returns the earliest time a request of cost units conforms to
// a bucket with the given TAT, never earlier than now.
func gcraAllowAt(tat, now, interval, burst, cost int64) int64 {
	// max(TAT, now) + (cost-burst)·interval, computed as one subtraction
	// (or addition) of a non-negative term so that a saturated TAT still
	// yields the right answer instead of wrapping through zero.
	base := max(tat, now)
	var at int64
	if cost <= burst {
		at = base - store.SatMul(interval, burst-cost)
	} else {
		at = store.SatAdd(base, store.SatMul(interval, cost-burst))
	}
	return max(at, now)
}

// gcraBook returns the TAT of a bucket after a request of cost units departs
// at time at.
func gcraBook(tat, at, interval, cost int64) int64 {
	return store.SatAdd(max(tat, at), store.SatMul(interval, cost))
}

// gcraPause returns the TAT that holds a bucket shut until the time until:
// the next request of cost 1 conforms at until, and the bucket refills from
// empty afterwards, so a pause never ends in a burst.
func gcraPause(tat, until, interval, burst int64) int64 {
	return max(tat, store.SatAdd(until, store.SatMul(interval, burst-1)))
}

// rateCap holds a bucket below its rule's rate while the server's answers
// say the fleet has less room than the rule (see quotaview.go): the rate is
// rate0 at time t0 and climbs by slope per second, until until. A rate0 of
// 0 caps nothing: the bucket is then only counted (see store.Store.Limit). Times
// are in the store's units (ns locally, µs in Redis), rates in units of
// cost per second.
type rateCap struct {
	rate0 float64
	t0    int64
	slope float64
	until int64
}

// intervalAt returns the emission interval in force at now for a bucket
// whose rule has interval iv, given unitsPerSecond store time units per
// second (1e9 locally, 1e6 in Redis). A cap never loosens a rule.
func (a rateCap) intervalAt(iv, now int64, unitsPerSecond float64) int64 {
	if now >= a.until {
		return iv
	}
	rate := a.rate0 + a.slope*float64(now-a.t0)/unitsPerSecond
	if rate <= 0 {
		return iv
	}
	adapted := unitsPerSecond / rate
	if adapted >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return max(iv, int64(math.Ceil(adapted)))
}

// localStore keeps buckets in this process, guarded by one mutex.
type localStore struct {
	clock Clock

	mu     sync.Mutex
	tats   map[string]int64 // bucket key → TAT, Unix nanoseconds
	caps   map[string]rateCap
	counts map[string]int64 // 1 + the units reported sent under a cap in force (see store.Store.Limit)
	sweep  store.Sweeper
}

func newLocalStore(c Clock) *localStore {
	return &localStore{
		clock:  c,
		tats:   make(map[string]int64),
		caps:   make(map[string]rateCap),
		counts: make(map[string]int64),
		sweep:  store.NewSweeper(c.Now().UnixNano()),
	}
}

func (s *localStore) Reserve(_ context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeSweep(now)

	// The request departs when its slowest bucket lets it. Each other
	// bucket is booked at the request's earliest time in it when the
	// request leaves within that bucket's lateness tolerance of it; further
	// ahead, the bucket is not booked now but deferred (see store.Reservation).
	// Booking a bucket at a later time would leave its capacity before then
	// unused: a deep queue on one endpoint would hold every other endpoint
	// behind it in a shared account-wide bucket.
	depart, limiter := now, 0
	for i, b := range bs {
		if at := gcraAllowAt(s.tats[b.Key], now, s.intervalLocked(b, now), b.Burst, b.Cost); at > depart {
			depart, limiter = at, i
		}
	}
	r := store.Reservation{Wait: time.Duration(depart - now), Limiter: limiter, Buckets: bs}
	if r.Wait > maxWait {
		return r, nil
	}
	r.OK = true
	u := newLocalBooking(s, bs)
	r.Undo = u
	if len(s.caps) > 0 {
		r.Counts = make([]int64, len(bs))
	}
	for i, b := range bs {
		prev := s.tats[b.Key]
		iv := s.intervalLocked(b, now)
		at := gcraAllowAt(prev, now, iv, b.Burst, b.Cost)
		if depart-at > int64(b.Lateness) {
			r.Deferred = append(r.Deferred, i)
			continue
		}
		u.prev[i] = prev
		u.booked[i] = gcraBook(prev, at, iv, b.Cost)
		s.tats[b.Key] = u.booked[i]
		if r.Counts != nil && s.cappedLocked(b.Key, now) {
			s.counts[b.Key] += b.Sent
			r.Counts[i] = s.counts[b.Key]
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

func (s *localStore) Limit(_ context.Context, b store.Bucket, c store.Cap) error {
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cappedLocked(b.Key, now) {
		s.counts[b.Key] = 1 // as limit.lua: a counted bucket never reports 0
	}
	s.caps[b.Key] = rateCap{rate0: c.Rate, t0: now, slope: c.Slope, until: store.SatAdd(now, int64(max(c.Span, 1)))}
	return nil
}

// Held is always 0: in one process, listen holds the waiters itself.
func (s *localStore) Held(context.Context, []store.Bucket) (time.Duration, error) { return 0, nil }

// localBooking is the undo of a localStore reservation: each bucket's TAT
// before and after the booking, so that cancel can tell whether its slot is
// still the last one.
type localBooking struct {
	s       *localStore
	buckets []store.Bucket
	// prev and booked are indexed as buckets; booked[i] is 0 for a bucket
	// not booked (deferred): a booked TAT is always after the epoch.
	prev, booked []int64
	done         bool // cancelled; guarded by s.mu
	// one holds prev and booked of a one-bucket booking, the common case,
	// so that it costs one allocation.
	one [2]int64
}

func newLocalBooking(s *localStore, bs []store.Bucket) *localBooking {
	u := &localBooking{s: s, buckets: bs}
	if len(bs) == 1 {
		u.prev, u.booked = u.one[:1:1], u.one[1:2:2]
	} else {
		tats := make([]int64, 2*len(bs))
		u.prev, u.booked = tats[:len(bs):len(bs)], tats[len(bs):]
	}
	return u
}

func (u *localBooking) Cancel(context.Context) error {
	s := u.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.done {
		return nil
	}
	u.done = true
	for i, b := range u.buckets {
		if tat, ok := s.tats[b.Key]; ok && u.booked[i] != 0 && tat == u.booked[i] {
			s.tats[b.Key] = u.prev[i]
		}
	}
	return nil
}

func (s *localStore) Pause(_ context.Context, bs []store.Bucket, d time.Duration) error {
	now := s.clock.Now().UnixNano()
	until := store.SatAdd(now, int64(max(d, 0)))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bs {
		s.tats[b.Key] = gcraPause(s.tats[b.Key], until, s.intervalLocked(b, now), b.Burst)
	}
	return nil
}

// intervalLocked returns the emission interval in force for b at now: the
// rule's, or slower while a cap holds the bucket back (see store.Store.Limit).
// s.mu must be held.
func (s *localStore) intervalLocked(b store.Bucket, now int64) int64 {
	iv := int64(b.Interval)
	if len(s.caps) > 0 {
		if a, ok := s.caps[b.Key]; ok {
			iv = a.intervalAt(iv, now, 1e9)
		}
	}
	return iv
}

// maybeSweep drops idle buckets when the map has doubled or a sweep is due.
// s.mu must be held.
func (s *localStore) maybeSweep(now int64) {
	if !s.sweep.Due(len(s.tats), now) {
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
	s.sweep.Swept(len(live), now)
}

// len returns the number of buckets held, for tests.
func (s *localStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tats)
}
