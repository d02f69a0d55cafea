package throttle

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// localBuckets are the token buckets a replica runs while Redis is
// unreachable (ModeFallback): one golang.org/x/time/rate Limiter per bucket
// key, sized to this replica's share of the rule. They keep the store
// contract as the other stores do: a request is booked in all its buckets
// or none, a waiting request's tokens go back when it gives up, and a pause
// holds the buckets shut, then lets them refill from empty. Idle limiters
// (full again) are dropped by sweeps, like localStore's buckets. It is safe
// for concurrent use; one mutex guards everything, and nothing sleeps or
// calls out under it.
type localBuckets struct {
	n atomic.Int64 // len(m), read without the lock on the shared path

	mu        sync.Mutex
	m         map[string]*localBucket
	held      map[*int64]heldLocal // waiting reservations, for refunds
	sweepSize int
	sweptAt   time.Time
	// latest is the latest time any limiter was used at. Callers read the
	// clock before taking the lock, so their times arrive out of order,
	// and a rate.Limiter used at an earlier time than before moves its
	// clock back and hands out the tokens of that time again. Limiters are
	// therefore only ever used at latest or later (waits are still measured
	// from the caller's now); this also holds when the clock steps back.
	latest time.Time
}

// localBucket is the limiter of one bucket key.
type localBucket struct {
	lim         *rate.Limiter
	share       float64   // the share lim is sized for
	pausedUntil time.Time // lim is only ever used at or after this time
	settling    bool      // its debt is being booked in Redis
	// settled: its debt is booked in Redis (or it was made after the
	// return, so all it spent is booked there too); it stays only for the
	// return's grace period (see reserveGrace), then dropSettled drops it.
	settled bool
}

// heldLocal is a reservation that may still be refunded: its parts in the
// order they were made, and its departure, after which it is forgotten.
type heldLocal struct {
	parts  []heldPart
	depart time.Time
}

type heldPart struct {
	r  *rate.Reservation
	at time.Time // the time it was made at (never before the bucket's pause)
}

// debt is a bucket's local spending, taken out to be booked in Redis.
type debt struct {
	key string
	b   *localBucket
}

func newLocalBuckets(now time.Time) *localBuckets {
	return &localBuckets{
		m:         make(map[string]*localBucket),
		held:      make(map[*int64]heldLocal),
		sweepSize: sweepMinSize,
		sweptAt:   now,
	}
}

// sized returns the limit and burst of b scaled by share: the rule's rate
// times share, and its burst times share rounded down, at least 1.
func sized(b *bucket, share float64) (rate.Limit, int) {
	perSecond := float64(time.Second) / float64(b.interval)
	burst := max(int(math.Floor(float64(b.burst)*share)), 1)
	return rate.Limit(perSecond * share), burst
}

// at returns the time to use limiters at for a caller at now: never
// before latest. l.mu must be held.
func (l *localBuckets) at(now time.Time) time.Time {
	l.latest = later(now, l.latest)
	return l.latest
}

// get returns the limiter of b sized for share, making it if needed.
// l.mu must be held.
func (l *localBuckets) get(now time.Time, b *bucket, share float64) *localBucket {
	e := l.m[b.key]
	if e == nil {
		lim, burst := sized(b, share)
		e = &localBucket{lim: rate.NewLimiter(lim, burst), share: share}
		l.m[b.key] = e
		l.n.Store(int64(len(l.m)))
		return e
	}
	if e.share != share {
		// The fleet changed size: resize, keeping the tokens already
		// spent.
		lim, burst := sized(b, share)
		at := later(l.at(now), e.pausedUntil)
		e.lim.SetLimitAt(at, lim)
		e.lim.SetBurstAt(at, burst)
		e.share = share
	}
	return e
}

// reserve books one slot for a request in the buckets bs, all or nothing,
// if it can depart within maxWait. The reservation has no prev or booked
// TATs (that is how refund tells it from a Redis one); when it must wait,
// prev holds one marker whose address finds it in held.
func (l *localBuckets) reserve(now time.Time, bs []bucket, maxWait time.Duration, share float64) reservation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maybeSweep(now)
	parts, wait, limiter := l.book(now, bs, nil, share)
	r := reservation{wait: wait, limiter: limiter, buckets: bs}
	if wait > maxWait {
		cancelParts(l.at(now), parts)
		return r
	}
	r.ok = true
	if wait > 0 {
		// Only a request that waits can give its slot back.
		marker := make([]int64, 1)
		r.prev = marker
		l.held[&marker[0]] = heldLocal{parts: parts, depart: now.Add(wait)}
	}
	return r
}

// reserveGrace books in the local buckets too, during the grace period
// after a return to the shared bucket, a request the shared bucket has
// just booked: each bucket whose booked TAT is not 0 (a deferred one is
// booked in its own call later). It returns the wait the local buckets
// impose and the index of the bucket that set it. If that wait exceeds
// maxWait, nothing is booked locally and ok is false: the request then
// departs at its shared slot, since it must not fail because of the
// return. A waiting booking is held under &booked[0], for refundHeld.
//
// Limiters made here are settled at once: what they spend is booked in
// Redis as well, so it is owed nothing.
func (l *localBuckets) reserveGrace(now time.Time, bs []bucket, booked []int64, maxWait time.Duration, share float64) (wait time.Duration, limiter int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maybeSweep(now)
	parts, wait, limiter := l.book(now, bs, booked, share)
	if wait > maxWait {
		cancelParts(l.at(now), parts)
		return wait, limiter, false
	}
	if wait > 0 {
		l.held[&booked[0]] = heldLocal{parts: parts, depart: now.Add(wait)}
	}
	return wait, limiter, true
}

// book reserves one slot in each bucket of bs, or, with booked non-nil
// (the grace period), in each whose booked TAT is not 0, and returns the
// parts made and the longest wait from now, with its bucket's index. In
// the outage (booked nil) a limiter spends anew, so it is no longer
// settled; in the grace period a new limiter is settled from the start.
// l.mu must be held.
func (l *localBuckets) book(now time.Time, bs []bucket, booked []int64, share float64) ([]heldPart, time.Duration, int) {
	parts := make([]heldPart, 0, len(bs))
	var wait time.Duration
	limiter := 0
	for i := range bs {
		if booked != nil && booked[i] == 0 {
			continue
		}
		_, known := l.m[bs[i].key]
		e := l.get(now, &bs[i], share)
		switch {
		case booked == nil:
			e.settled = false
		case !known:
			e.settled = true
		}
		at := later(l.at(now), e.pausedUntil)
		// A cost above the local burst (a share of the rule's burst) is
		// booked in burst-sized parts, one after the other.
		for left := bs[i].cost; left > 0; {
			n := min(left, int64(e.lim.Burst()))
			r := e.lim.ReserveN(at, int(n))
			d := time.Duration(math.MaxInt64)
			if r.OK() {
				parts = append(parts, heldPart{r, at})
				d = r.DelayFrom(now)
			}
			if d > wait {
				wait, limiter = d, i
			}
			left -= n
		}
	}
	return parts, wait, limiter
}

// refund gives back the tokens of a waiting local reservation, as far as
// rate.Reservation.CancelAt can: tokens booked by later requests stay
// spent.
func (l *localBuckets) refund(now time.Time, r *reservation) {
	if len(r.prev) != 1 {
		return
	}
	l.refundHeld(now, &r.prev[0])
}

// refundHeld gives back the tokens of the waiting booking held under key
// (a local reservation's marker, or a grace booking's &booked[0]), if
// any.
func (l *localBuckets) refundHeld(now time.Time, key *int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[key]
	if !ok {
		return
	}
	delete(l.held, key)
	cancelParts(l.at(now), h.parts)
}

// cancelParts cancels reservation parts, latest first, each at its own
// time or later, so a paused bucket's clock never moves back.
func cancelParts(now time.Time, parts []heldPart) {
	for i := len(parts) - 1; i >= 0; i-- {
		parts[i].r.CancelAt(later(now, parts[i].at))
	}
}

// pause holds the buckets bs shut until now+d; afterwards each lets one
// request of cost 1 go, then refills from empty, as gcraPause does.
func (l *localBuckets) pause(now time.Time, bs []bucket, d time.Duration, share float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.at(now).Add(max(d, 0))
	for i := range bs {
		e := l.get(now, &bs[i], share)
		if !until.After(e.pausedUntil) {
			continue
		}
		// A limiter already booked beyond until holds at least as long;
		// otherwise a fresh one, empty but for one token at until.
		if e.lim.TokensAt(until) >= 1 {
			lim, burst := sized(&bs[i], share)
			fresh := rate.NewLimiter(lim, burst)
			fresh.ReserveN(until, burst-1)
			e.lim = fresh
		}
		e.pausedUntil = until
	}
}

// takeDebts returns a copy of bs with each bucket's cost raised by what
// this replica spent locally and has not yet earned back (capped at the
// rule's burst), or nil when nothing is owed, with the limiters concerned.
// The limiters stay in use (the Redis call may fail) but are marked, so no
// concurrent request books the same debt; settleDebts drops them once
// Redis has booked it, releaseDebts unmarks them if it could not.
func (l *localBuckets) takeDebts(now time.Time, bs []bucket) ([]bucket, []debt) {
	if l.n.Load() == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []bucket
	var debts []debt
	for i := range bs {
		e := l.m[bs[i].key]
		if e == nil || e.settling || e.settled {
			continue
		}
		e.settling = true
		debts = append(debts, debt{bs[i].key, e})
		now := l.at(now)
		at := later(now, e.pausedUntil)
		spent := float64(e.lim.Burst()) - e.lim.TokensAt(at)
		spent += float64(e.lim.Limit()) * at.Sub(now).Seconds() // a pause not yet over
		owed := int64(math.Ceil(spent - 1e-9))
		if owed <= 0 {
			continue
		}
		if out == nil {
			out = append([]bucket(nil), bs...)
		}
		out[i].cost = min(satAdd(out[i].cost, owed), out[i].burst)
	}
	return out, debts
}

// settleDebts deals with the limiters whose debt Redis has booked. With
// keep (the return and its grace period) they stay, still carrying what
// they spent, marked settled so the debt is not booked again (see
// reserveGrace); otherwise they are dropped, so the next outage starts
// afresh.
func (l *localBuckets) settleDebts(debts []debt, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range debts {
		switch {
		case keep:
			d.b.settling, d.b.settled = false, true
		case l.m[d.key] == d.b:
			delete(l.m, d.key)
		}
	}
	l.n.Store(int64(len(l.m)))
}

// unsettle ends the grace period: the settled limiters owe their spending
// again, so the next request of each books it in Redis (takeDebts) and
// drops the limiter. Their spending includes the requests still waiting
// for their local slot, whose shared slots were booked earlier than they
// depart: booked again, the shared bucket counts them when they go, and
// the replicas leaving the grace period do not add them to the shared
// burst. A limiter that owes nothing (full again) is dropped at once, so
// that a bucket not used again does not keep the shared path taking l.mu.
func (l *localBuckets) unsettle(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now = l.at(now)
	for k, e := range l.m {
		e.settled = false
		if !now.Before(e.pausedUntil) && e.lim.TokensAt(now) >= float64(e.lim.Burst()) {
			delete(l.m, k)
		}
	}
	l.n.Store(int64(len(l.m)))
}

// releaseDebts unmarks limiters whose debt Redis could not book.
func (l *localBuckets) releaseDebts(debts []debt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range debts {
		d.b.settling = false
	}
}

// maybeSweep drops limiters that are full again (equal to new ones) and
// held reservations whose departure has passed, when the map has doubled
// or a sweep is due. l.mu must be held.
func (l *localBuckets) maybeSweep(now time.Time) {
	size := len(l.m) + len(l.held)
	if size < l.sweepSize && (now.Sub(l.sweptAt) < sweepEvery || size == 0) {
		return
	}
	for k, e := range l.m {
		if !now.Before(e.pausedUntil) && e.lim.TokensAt(now) >= float64(e.lim.Burst()) {
			delete(l.m, k)
		}
	}
	for k, h := range l.held {
		if !now.Before(h.depart) {
			delete(l.held, k)
		}
	}
	// Go maps do not shrink: copy what is left.
	m := make(map[string]*localBucket, len(l.m))
	for k, e := range l.m {
		m[k] = e
	}
	held := make(map[*int64]heldLocal, len(l.held))
	for k, h := range l.held {
		held[k] = h
	}
	l.m, l.held = m, held
	l.n.Store(int64(len(l.m)))
	l.sweepSize = max(2*(len(m)+len(held)), sweepMinSize)
	l.sweptAt = now
}

// len returns the number of limiters and held reservations, for tests.
func (l *localBuckets) len() (limiters, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m), len(l.held)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
