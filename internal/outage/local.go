package outage

import (
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle/internal/store"
)

// localBuckets are the limiters a replica runs while Redis is unreachable
// (Fallback): one per bucket key, sized to this replica's share of the
// rule, a golang.org/x/time/rate Limiter for a leaky or token bucket and
// the rule's own algorithm for a window bucket (window.go). They keep the store
// contract as the other stores do: a request is booked in all its buckets
// or none, a waiting request's tokens go back when it gives up, and a pause
// holds the buckets shut, then lets them refill from empty. Idle limiters
// (full again) are dropped by sweeps, like the root's local store's buckets. It is safe
// for concurrent use; one mutex guards everything, and nothing sleeps or
// calls out under it.
type localBuckets struct {
	n atomic.Int64 // len(m), read without the lock on the shared path

	mu sync.Mutex
	m  map[string]*localBucket
	// shadow counts, per window bucket, this replica's requests booked
	// in the shared bucket (shadowBook): a window bucket's limiter made
	// in an outage starts from them.
	shadow  map[string]*windowLimiter
	waiting map[bookingID]waitingBooking // waiting bookings, for cancels
	next    bookingID                    // the last bookingID given out
	sweep   store.Sweeper
	// latest is the latest time any limiter was used at. Callers read the
	// clock before taking the lock, so their times arrive out of order,
	// and a rate.Limiter used at an earlier time than before moves its
	// clock back and hands out the tokens of that time again. Limiters are
	// therefore only ever used at latest or later (waits are still measured
	// from the caller's now); this also holds when the clock steps back.
	latest time.Time
}

// localBucket is the limiter of one bucket key: lim for a leaky or token
// bucket, win for a window bucket (window.go).
type localBucket struct {
	lim         *rate.Limiter
	win         *windowLimiter
	share       float64   // the share lim or win is sized for
	pausedUntil time.Time // lim is only ever used at or after this time
	settling    bool      // its debt is being booked in Redis
	// settled: its debt is booked in Redis (or it was made after the
	// return, so all it spent is booked there too); it stays only for the
	// return's grace period (see reserveGrace), then dropSettled drops it.
	settled bool
	// graced: its grace period is over (unsettle). Every request it booked
	// in the grace period was booked in Redis too, so it owes only the
	// units still waiting for their local slot (see takeDebts).
	graced bool
}

// bookingID names a waiting booking in localBuckets.waiting: a sequence number,
// so that any copy of the reservation holding it finds the booking, and
// none finds another. 0 names none.
type bookingID uint64

// waitingBooking is a booking that may still be cancelled: its parts in the
// order they were made, and its departure, after which it is forgotten.
type waitingBooking struct {
	parts  []bookedPart
	depart time.Time
}

type bookedPart struct {
	r  *rate.Reservation
	at time.Time // the time it was made at (never before the bucket's pause)
	// A window bucket's part: win booked wp.
	win *windowLimiter
	wp  windowPart
}

// debt is a bucket's local spending, taken out to be booked in Redis.
type debt struct {
	key string
	b   *localBucket
}

func newLocalBuckets(now time.Time) *localBuckets {
	return &localBuckets{
		m:       make(map[string]*localBucket),
		shadow:  make(map[string]*windowLimiter),
		waiting: make(map[bookingID]waitingBooking),
		sweep:   store.NewSweeper(now.UnixNano()),
	}
}

// sized returns the limit and burst of b scaled by share: the rule's rate
// times share, and its burst times share rounded down, at least 1.
func sized(b *store.Bucket, share float64) (rate.Limit, int) {
	perSecond := float64(time.Second) / float64(b.Interval)
	burst := max(int(math.Floor(float64(b.Burst)*share)), 1)
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
func (l *localBuckets) get(now time.Time, b *store.Bucket, share float64) *localBucket {
	e := l.m[b.Key]
	if e == nil {
		e = &localBucket{share: share}
		if b.Algorithm.Windowed() {
			e.win = newWindowLimiter(b, share)
		} else {
			lim, burst := sized(b, share)
			e.lim = rate.NewLimiter(lim, burst)
		}
		l.m[b.Key] = e
		l.n.Store(int64(len(l.m)))
		return e
	}
	if e.share != share && e.win != nil {
		e.win.resize(b, share)
		e.share = share
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

// localBooked is what a booking in the local buckets tells its caller:
// whether it was made, the longest wait from now with the index of the
// bucket that set it, and, for a booking that waits (only those can give
// their slot back), its name in waiting.
type localBooked struct {
	ok      bool
	wait    time.Duration
	limiter int
	id      bookingID
}

// localRequest is a request to book in the local buckets: one slot in each
// of bs but those at the indices skip (buckets a grace booking deferred),
// within maxWait, in limiters sized to share. In the grace period (see
// reserveGrace) a new limiter is settled from the start; in the outage a
// limiter spends anew, so it is no longer settled.
type localRequest struct {
	bs      []store.Bucket
	skip    []int
	grace   bool
	maxWait time.Duration
	share   float64
	// emptyUntil, when after the booking's time, is when the requests
	// this replica booked in the shared bucket stop departing (the
	// Store's sharedUntil): a limiter made for the outage departs
	// nothing before then (see startOutage).
	emptyUntil time.Time
}

// reserveFor books q, all or nothing, if it can depart within q.maxWait.
func (l *localBuckets) reserveFor(now time.Time, q localRequest) localBooked {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maybeSweep(now)
	parts, wait, limiter := l.book(now, q)
	b := localBooked{wait: wait, limiter: limiter}
	if wait > q.maxWait {
		cancelParts(l.at(now), parts)
		return b
	}
	b.ok = true
	if wait > 0 {
		l.next++
		b.id = l.next
		l.waiting[b.id] = waitingBooking{parts: parts, depart: now.Add(wait)}
	}
	return b
}

// reserveGrace books in the local buckets too, during the grace period
// after a return to the shared bucket, the request r the shared bucket has
// just booked: each of its buckets but the deferred ones (booked in their
// own call later). It returns the wait the local buckets impose and the
// index of the bucket that set it. If that wait exceeds maxWait, nothing is
// booked locally and ok is false: the request then departs at its shared
// slot, since it must not fail because of the return. A waiting booking is
// kept under the returned id, for cancelBooking.
//
// Limiters made here are settled at once: what they spend is booked in
// Redis as well, so it is owed nothing.
func (l *localBuckets) reserveGrace(now time.Time, r *store.Reservation, maxWait time.Duration, share float64) localBooked {
	return l.reserveFor(now, localRequest{bs: r.Buckets, skip: r.Deferred, grace: true, maxWait: maxWait, share: share})
}

// book reserves one slot in each bucket of q.bs but those at the indices
// q.skip, and returns the parts made and the longest wait from now, with
// its bucket's index. The leaky and token buckets are each booked at their
// earliest; the window buckets then at the request's departure or later,
// as the other stores book them, and only when it falls within q.maxWait.
// l.mu must be held.
func (l *localBuckets) book(now time.Time, q localRequest) ([]bookedPart, time.Duration, int) {
	bs, share := q.bs, q.share
	parts := make([]bookedPart, 0, len(bs))
	var wait time.Duration
	limiter := 0
	var windows []int
	for i := range bs {
		if slices.Contains(q.skip, i) {
			continue
		}
		_, known := l.m[bs[i].Key]
		e := l.get(now, &bs[i], share)
		switch {
		case !q.grace:
			// Spent in an outage: owed whole on the return.
			e.settled, e.graced = false, false
			if !known {
				l.startOutage(now, e, &bs[i], q.emptyUntil)
			}
		case !known:
			e.settled = true
		}
		if e.win != nil {
			windows = append(windows, i)
			continue
		}
		at := later(l.at(now), e.pausedUntil)
		// A cost above the local burst (a share of the rule's burst) is
		// booked in burst-sized parts, one after the other.
		for left := bs[i].Cost; left > 0; {
			n := min(left, int64(e.lim.Burst()))
			r := e.lim.ReserveN(at, int(n))
			d := waitNever
			if r.OK() {
				parts = append(parts, bookedPart{r: r, at: at})
				d = r.DelayFrom(now)
			}
			if d > wait {
				wait, limiter = d, i
			}
			left -= n
		}
	}
	if len(windows) == 0 || wait > q.maxWait {
		return parts, wait, limiter
	}
	return l.bookWindows(now, q, windows, parts, wait, limiter)
}

// bookWindows books the window buckets of q at the indices windows, at
// the departure wait from now that the other buckets set, or later: in
// rounds, each moving the departure to the first window bucket's earliest
// time after it, until none does (as reserve.lua and the local store
// decide). l.mu must be held.
func (l *localBuckets) bookWindows(now time.Time, q localRequest, windows []int, parts []bookedPart, wait time.Duration, limiter int) ([]bookedPart, time.Duration, int) {
	nowUs := floorMicros(l.at(now))
	depart := floorMicros(now.Add(wait))
	floors := make([]int64, len(q.bs))
	for _, i := range windows {
		e := l.m[q.bs[i].Key]
		floors[i] = floorMicros(later(l.at(now), e.pausedUntil))
	}
	for moved := true; moved; {
		moved = false
		for _, i := range windows {
			_, t := l.m[q.bs[i].Key].win.book(nowUs, floors[i], depart, q.bs[i].Cost, false)
			if t > depart {
				depart, limiter, moved = t, i, true
			}
		}
	}
	wait = max(time.Duration(depart*1000-now.UnixNano()), wait)
	if wait > q.maxWait {
		return parts, wait, limiter
	}
	for _, i := range windows {
		win := l.m[q.bs[i].Key].win
		wps, _ := win.book(nowUs, floors[i], depart, q.bs[i].Cost, true)
		for _, wp := range wps {
			parts = append(parts, bookedPart{win: win, wp: wp})
		}
	}
	return parts, wait, limiter
}

// startOutage starts a limiter just made in an outage from what this
// replica booked in the shared bucket: a leaky or token bucket empty at
// emptyUntil, when its requests booked there stop departing (so that its
// first local slot follows them at its share's pace rather than bursting
// beside them), a window bucket with the requests it booked in the
// shared bucket's windows (see shadowBook). Neither departs before
// emptyUntil. l.mu must be held.
func (l *localBuckets) startOutage(now time.Time, e *localBucket, b *store.Bucket, emptyUntil time.Time) {
	if e.win != nil {
		if sh := l.shadow[b.Key]; sh != nil {
			e.win.seed(sh)
			delete(l.shadow, b.Key)
		}
	}
	if !emptyUntil.After(l.at(now)) {
		return
	}
	if e.win == nil {
		e.lim.ReserveN(emptyUntil, e.lim.Burst())
	}
	e.pausedUntil = emptyUntil
}

// full reports whether the bucket is as a new one at now (nothing spent
// that still counts, no pause holding it), so that dropping it changes
// nothing.
func (e *localBucket) full(now time.Time) bool {
	if now.Before(e.pausedUntil) {
		return false
	}
	if e.win != nil {
		return !e.win.live(floorMicros(now))
	}
	return e.lim.TokensAt(now) >= float64(e.lim.Burst())
}

// cancelBooking gives back the tokens of the waiting booking kept under id, if
// any, as far as rate.Reservation.CancelAt can: tokens booked by later
// requests stay spent. A second cancel of the same id finds nothing.
func (l *localBuckets) cancelBooking(now time.Time, id bookingID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.waiting[id]
	if !ok {
		return
	}
	delete(l.waiting, id)
	cancelParts(l.at(now), h.parts)
}

// cancelParts cancels reservation parts, latest first, each at its own
// time or later, so a paused bucket's clock never moves back.
func cancelParts(now time.Time, parts []bookedPart) {
	for i := len(parts) - 1; i >= 0; i-- {
		if p := parts[i]; p.win != nil {
			p.win.refund(floorMicros(now), p.wp)
		} else {
			p.r.CancelAt(later(now, p.at))
		}
	}
}

// pause holds the buckets bs shut until now+d; afterwards each lets one
// request of cost 1 go, then refills from empty, as the GCRA stores' pause
// does (internal/localstore, pause.lua).
func (l *localBuckets) pause(now time.Time, bs []store.Bucket, d time.Duration, share float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.at(now).Add(max(d, 0))
	for i := range bs {
		e := l.get(now, &bs[i], share)
		if !until.After(e.pausedUntil) {
			continue
		}
		if e.win != nil {
			e.win.pause(ceilMicros(until.UnixNano()))
			e.pausedUntil = until
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
func (l *localBuckets) takeDebts(now time.Time, bs []store.Bucket) ([]store.Bucket, []debt) {
	if l.n.Load() == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.Bucket
	var debts []debt
	for i := range bs {
		e := l.m[bs[i].Key]
		if e == nil || e.settling || e.settled {
			continue
		}
		e.settling = true
		debts = append(debts, debt{bs[i].Key, e})
		now := l.at(now)
		at := later(now, e.pausedUntil)
		var spent float64
		switch {
		case e.win != nil:
			spent = float64(e.win.owed(floorMicros(at), e.graced))
		case e.graced:
			// Only what still waits: see unsettle.
			spent = max(-e.lim.TokensAt(at), 0)
		default:
			spent = float64(e.lim.Burst()) - e.lim.TokensAt(at)
			spent += float64(e.lim.Limit()) * at.Sub(now).Seconds() // a pause not yet over
		}
		owed := int64(math.Ceil(spent - 1e-9))
		if owed <= 0 {
			continue
		}
		if out == nil {
			out = append([]store.Bucket(nil), bs...)
		}
		out[i].Cost = min(store.SatAdd(out[i].Cost, owed), out[i].Burst)
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

// unsettle ends the grace period: the settled limiters owe again, so the
// next request of each books it in Redis (takeDebts) and drops the
// limiter. What they owe is the requests still waiting for their local
// slot, whose shared slots were booked earlier than they depart: booked
// again, the shared bucket counts them when they go, and the replicas
// leaving the grace period do not add them to the shared burst. The rest
// of their spending (the local burst, the requests gone) is in Redis
// already: every request of the grace period booked there first. Booked
// again as a return's debt, it held an 8 × 16 fleet on a 200/s, burst
// 120 rule, four of whose replicas tripped to the outage mode for 250 ms
// on a loaded machine, at 21-128/s in the second after their grace
// period (the feedback matrix's 8x16_fixed-60s cells, 15 units of local
// burst a replica). A limiter that owes nothing (full again) is dropped
// at once, so that a bucket not used again does not keep the shared path
// taking l.mu.
func (l *localBuckets) unsettle(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now = l.at(now)
	for k, e := range l.m {
		e.graced = e.graced || e.settled
		e.settled = false
		if e.full(now) {
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
// waiting bookings whose departure has passed, when the map has doubled
// or a sweep is due. l.mu must be held.
func (l *localBuckets) maybeSweep(now time.Time) {
	if !l.sweep.Due(len(l.m)+len(l.waiting)+len(l.shadow), now.UnixNano()) {
		return
	}
	for k, e := range l.m {
		if e.full(now) {
			delete(l.m, k)
		}
	}
	for k, h := range l.waiting {
		if !now.Before(h.depart) {
			delete(l.waiting, k)
		}
	}
	for k, sh := range l.shadow {
		if !sh.live(floorMicros(now)) {
			delete(l.shadow, k)
		}
	}
	// Go maps do not shrink: copy what is left.
	m := make(map[string]*localBucket, len(l.m))
	for k, e := range l.m {
		m[k] = e
	}
	waiting := make(map[bookingID]waitingBooking, len(l.waiting))
	for k, h := range l.waiting {
		waiting[k] = h
	}
	l.m, l.waiting, l.shadow = m, waiting, maps.Clone(l.shadow)
	l.n.Store(int64(len(l.m)))
	l.sweep.Swept(len(m)+len(waiting)+len(l.shadow), now.UnixNano())
}

// len returns the number of limiters and waiting bookings, for tests.
func (l *localBuckets) len() (limiters, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m), len(l.waiting)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitNever is the wait of a slot no bucket can give (a cost above the
// burst; a rate.Reservation that is not OK in the outage's local buckets):
// longer than any maxWait.
const waitNever = time.Duration(math.MaxInt64)

// charge reserves units more in a local bucket, from now, in chunks of the
// limiter's burst (see Store.Charge).
func (l *localBuckets) charge(now time.Time, b store.Bucket, units int64, share float64) {
	if units <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.get(now, &b, share)
	at := l.at(now)
	if e.win != nil {
		e.win.charge(floorMicros(at), min(units, maxChargeBursts*e.win.w.Quota))
		return
	}
	burst := int64(max(e.lim.Burst(), 1))
	// A hostile or broken report cannot make the loop long: beyond
	// maxChargeBursts the bucket is as good as shut for this outage.
	units = min(units, maxChargeBursts*burst)
	for units > 0 {
		n := min(units, burst)
		e.lim.ReserveN(at, int(n))
		units -= n
	}
}

// maxChargeBursts bounds a local charge, in bursts of the limiter.
const maxChargeBursts = 64
