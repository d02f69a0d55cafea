package localstore

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/store"
)

// Clock tells the time: the Transport's clock. The root's Clock satisfies
// it.
type Clock interface {
	Now() time.Time
}

var _ store.Store = (*Store)(nil)

// Store keeps buckets in this process, guarded by one mutex: the store of a
// Transport without WithRedis. It implements store.Store and is safe for
// concurrent use; the zero Store is not usable, New makes one.
type Store struct {
	clock Clock

	mu     sync.Mutex
	tats   map[string]int64 // bucket key → TAT, Unix nanoseconds
	caps   map[string]rateCap
	counts map[string]int64 // 1 + the units reported sent under a cap in force (see store.Store.Limit)
	// holds is the end of the last pause of a leaky or token bucket, until
	// it has passed: what Limit does not stretch (see limit.lua).
	holds map[string]int64
	// wins holds the state of the window buckets (window.go), by key; a
	// token bucket keeps its full instant in tats (see
	// internal/algorithm's token.go).
	wins map[string]*windowState
	// credits holds the credits of leaky and token buckets (credit.go),
	// by key, while one is usable.
	credits map[string]credit
	sweep   store.Sweeper
}

// New returns an empty store that reads the time from c.
func New(c Clock) *Store {
	return &Store{
		clock:   c,
		tats:    make(map[string]int64),
		caps:    make(map[string]rateCap),
		counts:  make(map[string]int64),
		holds:   make(map[string]int64),
		wins:    make(map[string]*windowState),
		credits: make(map[string]credit),
		sweep:   store.NewSweeper(c.Now().UnixNano()),
	}
}

func (s *Store) Reserve(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	r, err := s.reserve(ctx, bs, maxWait, false)
	return r.Reservation, err
}

// quoted is a reservation with, when asked for, each bucket's room after
// it (ReserveQuota).
type quoted struct {
	store.Reservation
	quotas []store.Quota
}

// reserve is Reserve, and with quota set ReserveQuota.
func (s *Store) reserve(_ context.Context, bs []store.Bucket, maxWait time.Duration, quota bool) (quoted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.maybeSweep(now)
	r := s.reserveLocked(bs, now, maxWait)
	q := quoted{Reservation: r}
	if quota {
		q.quotas = make([]store.Quota, len(bs))
		for i := range bs {
			q.quotas[i] = s.quotaLocked(bs[i], now)
		}
	}
	return q, nil
}

// nowLocked returns the instant of the call being decided: the clock's
// time, read under s.mu, so that calls are decided in the order of their
// instants. Read before the lock, by a caller overtaken on the way to it,
// the instant lay before a sliding log's newest entry; LogAt put the
// departure at that entry, microseconds away, and a strict server
// (maxWait 0) refused the request with room in its window (a Stripe fleet
// at 95 of 100 in the trailing second, in throttletest's Stripe profile).
// A clock that goes back (a wall clock stepped) is read as it is: the
// buckets then make the requests wait longer, never less. s.mu must be
// held.
func (s *Store) nowLocked() int64 { return s.clock.Now().UnixNano() }

// reserveLocked books bs at now, as Reserve says. s.mu must be held.
func (s *Store) reserveLocked(bs []store.Bucket, now int64, maxWait time.Duration) store.Reservation {
	for i := range bs {
		if bs[i].Algorithm.Windowed() {
			return s.reserveWindowsLocked(bs, now, maxWait)
		}
	}

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
	if len(bs) == 1 && bs[0].Corrected && depart > now && maxWait >= 0 && len(s.credits) > 0 && s.holds[bs[0].Key] <= now {
		if r, ok := s.reserveOnCreditLocked(bs, now); ok {
			return r
		}
	}
	r := store.Reservation{Wait: time.Duration(depart - now), Limiter: limiter, Buckets: bs}
	if r.Wait > maxWait {
		return r
	}
	r.OK = true
	u := newLocalBooking(s, bs)
	r.Undo, r.Marks = u, u.booked
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
	return r
}

// reserveOnCreditLocked books the one bucket of bs, whose request would
// queue, on its credit when that covers the request's cost: the request
// leaves at once and the TAT stays (credit.go). Its mark is the credit's,
// which bounds the room left after it as before it; and its undo gives
// nothing back (prev = booked = mark), as a slot with others booked
// behind it stays spent. s.mu must be held.
func (s *Store) reserveOnCreditLocked(bs []store.Bucket, now int64) (store.Reservation, bool) {
	b := bs[0]
	iv := s.intervalLocked(b, now)
	k, c := s.creditLocked(b.Key, now, iv)
	// The credit must cover the cost still at the latest the request may
	// reach the server: its lateness tolerance after now.
	if c.usable(store.SatAdd(now, int64(b.Lateness)), iv) < b.Cost {
		return store.Reservation{}, false
	}
	s.setCreditLocked(b.Key, credit{units: k - b.Cost, mark: c.mark}, now, iv)
	u := newLocalBooking(s, bs)
	u.prev[0], u.booked[0] = c.mark, c.mark
	r := store.Reservation{OK: true, Buckets: bs, Undo: u, Marks: u.booked}
	if len(s.caps) > 0 {
		r.Counts = make([]int64, 1)
		if s.cappedLocked(b.Key, now) {
			s.counts[b.Key] += b.Sent
			r.Counts[0] = s.counts[b.Key]
		}
	}
	return r, true
}

// cappedLocked reports whether a cap is in force for key at now, dropping
// one that has ended (and its count, as Redis does). s.mu must be held.
func (s *Store) cappedLocked(key string, now int64) bool {
	a, ok := s.caps[key]
	if ok && a.until <= now {
		delete(s.caps, key)
		delete(s.counts, key)
		return false
	}
	return ok
}

func (s *Store) Limit(_ context.Context, b store.Bucket, c store.Cap) (store.Stretch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	var paid float64
	if s.cappedLocked(b.Key, now) {
		paid = s.caps[b.Key].paid
	} else {
		s.counts[b.Key] = 1 // as limit.lua: a counted bucket never reports 0
	}
	was := s.intervalLocked(b, now)
	next := rateCap{rate0: c.Rate, t0: now, slope: c.Slope, until: store.SatAdd(now, int64(max(c.Span, 1))), paid: max(paid, c.Debt)}
	s.caps[b.Key] = next
	if b.Algorithm.Windowed() {
		return store.Stretch{}, nil
	}
	// Only a cap that retimes and slows the bucket stretches what it
	// booked ahead of now (or of its pause's end), and its waiters with
	// it; any other paces what books after it: see limit.lua. The
	// stretched lead is rounded up to a whole microsecond, as limit.lua's
	// is, so that the two stores decide alike (internal/algorithm's
	// conformance traces).
	from := max(now, s.holds[b.Key])
	var st store.Stretch
	if tat, will := s.tats[b.Key], next.intervalAt(int64(b.Interval), now, 1e9); c.Retime && tat > from && will > was {
		stretched := math.Ceil(float64(tat-from)*float64(will)/float64(was)/1e3) * 1e3
		s.tats[b.Key] = from + int64(stretched)
		st = store.Stretch{From: time.Duration(from - now), Ratio: float64(will) / float64(was)}
	}
	if c.Debt > paid {
		// The part of the debt this count has not paid pushes the next
		// slot, at the capped interval, from the later of the TAT, now
		// and the pause's end (store.Cap.Debt). In µs, rounded up, as
		// limit.lua's push is: the stores decide alike.
		ivMicros := math.Ceil(float64(s.intervalLocked(b, now)) / 1e3)
		push := int64(math.Ceil((c.Debt-paid)*ivMicros) * 1e3)
		base := max(s.tats[b.Key], from)
		// Due by now + PayBy (store.Cap.PayBy), as limit.lua; PayBy in
		// whole µs rounded up, as the Redis store passes it.
		if by := (c.PayBy + time.Microsecond - 1) / time.Microsecond * time.Microsecond; by > 0 {
			push = max(min(push, store.SatAdd(now, int64(by))-base), 0)
		}
		s.tats[b.Key] = store.SatAdd(base, push)
	}
	return st, nil
}

// Held is always 0: in one process, listen holds the waiters itself.
func (s *Store) Held(context.Context, []store.Bucket) (time.Duration, error) { return 0, nil }

// localBooking is the undo of a Store reservation: each bucket's TAT
// before and after the booking, so that cancel can tell whether its slot is
// still the last one.
type localBooking struct {
	s       *Store
	buckets []store.Bucket
	// prev and booked are indexed as buckets; booked[i] is 0 for a bucket
	// not booked (deferred): a booked TAT is always after the epoch.
	prev, booked []int64
	done         bool // cancelled; guarded by s.mu
	// one holds prev and booked of a one-bucket booking, the common case,
	// so that it costs one allocation.
	one [2]int64
}

func newLocalBooking(s *Store, bs []store.Bucket) *localBooking {
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
	now := s.nowLocked()
	if u.done {
		return nil
	}
	u.done = true
	for i, b := range u.buckets {
		if b.Algorithm.Windowed() {
			s.refundWindowLocked(b, now, u.prev[i], u.booked[i])
			continue
		}
		if tat, ok := s.tats[b.Key]; ok && u.booked[i] != 0 && tat == u.booked[i] {
			s.tats[b.Key] = u.prev[i]
		}
	}
	return nil
}

func (s *Store) Pause(_ context.Context, bs []store.Bucket, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	until := store.SatAdd(now, int64(max(d, 0)))
	for _, b := range bs {
		switch {
		case b.Algorithm.Windowed():
			s.pauseWindowLocked(b, now, until)
		case b.Algorithm == store.TokenBucket:
			s.tats[b.Key] = algorithm.TokenPause(s.tats[b.Key], until, s.intervalLocked(b, now), b.Burst)
			s.holds[b.Key] = max(s.holds[b.Key], until)
		default:
			s.tats[b.Key] = gcraPause(s.tats[b.Key], until, s.intervalLocked(b, now), b.Burst)
			s.holds[b.Key] = max(s.holds[b.Key], until)
		}
	}
	return nil
}

// intervalLocked returns the emission interval in force for b at now: the
// rule's, or slower while a cap holds the bucket back (see store.Store.Limit).
// s.mu must be held.
func (s *Store) intervalLocked(b store.Bucket, now int64) int64 {
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
func (s *Store) maybeSweep(now int64) {
	if !s.sweep.Due(len(s.tats)+len(s.wins), now) {
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
	holds := make(map[string]int64)
	for k, h := range s.holds {
		if h > now {
			holds[k] = h
		}
	}
	s.holds = holds
	wins := make(map[string]*windowState)
	for k, w := range s.wins {
		if w.live(floorMicros(now)) {
			wins[k] = w
		}
	}
	s.wins = wins
	credits := make(map[string]credit)
	for k, c := range s.credits {
		if c.mark > now {
			credits[k] = c
		}
	}
	s.credits = credits
	s.sweep.Swept(len(live)+len(wins), now)
}

// Len returns the number of buckets held: for tests of the sweep and of the
// Transport's memory.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tats) + len(s.wins)
}

// TAT returns the TAT of the bucket key (Unix ns; 0 for a bucket the store
// does not hold): for tests that hold the store's state to the maths.
func (s *Store) TAT(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tats[key]
}

// TATs returns a copy of every bucket's TAT, by key: for tests that check a
// request left the store as it was.
func (s *Store) TATs() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int64, len(s.tats))
	for k, v := range s.tats {
		m[k] = v
	}
	return m
}
