package outage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// Clock tells the time: the Transport's clock. The root's Clock satisfies
// it.
type Clock interface {
	Now() time.Time
}

// Store wraps the Redis store: it bounds every call with a short
// timeout (store.Timeout), and when a call fails or times out it opens its
// breaker and serves requests in the outage mode (local buckets, fail open
// or fail closed) until a half-open probe finds Redis answering again. See
// docs/OUTAGES.md. It is safe for concurrent use.
type Store struct {
	opts    Options // as made, defaults filled in (see Options)
	primary store.Store
	clock   Clock
	timeout *store.Timeout
	// guard runs each Redis call on a goroutine of its own, so that the
	// timeout holds even when the client ignores context deadlines (go-redis
	// without ContextTimeoutEnabled reads until its ReadTimeout).
	guard bool
	// reserveKept is set when the primary bounds its reserve calls by the
	// shared timeout itself (Options.ReserveKept): they then go to it as
	// they are, with no context of the outage store's around them.
	reserveKept bool
	outage      Mode
	brk         *breaker
	local       *localBuckets
	fleet       func() int64 // live replicas last seen by the heartbeat; 0 if none yet
	// graceUntil is the end (UnixNano, by clock) of the grace period after
	// the last return to the shared bucket, or 0: until then requests also
	// respect their local share buckets (see inGrace).
	graceUntil atomic.Int64
	// outageShare is the share (float64 bits) the local buckets last ran
	// at during an outage, or 0. The grace period keeps to it: right after
	// a Redis restart the heartbeat's count starts again from 1 as the
	// replicas beat in turn, and a share taken from it would be too large.
	outageShare atomic.Uint64
	// sharedUntil is the latest departure (UnixNano, by clock) of a
	// request this replica booked in the shared bucket: at the switch to
	// the local buckets, the requests booked there before it still depart
	// until then, at the shared bucket's pace, so a limiter made in the
	// outage starts empty at that instant (see localRequest.emptyUntil)
	// instead of spending its share, burst and all, beside them. One value
	// for every key: a key whose own queue ended sooner starts its local
	// bucket up to that much late, once, at the switch.
	sharedUntil atomic.Int64
	share       float64 // explicit share (WithFleetShare), or 0
	assumed     int64   // fleet size assumed before any heartbeat
	onCall      func(ctx context.Context, call, rule string, d time.Duration, err error)
}

var _ store.Store = (*Store)(nil)

// Mode returns the mode s is in now: Shared, or its outage mode while the
// breaker is open.
func (f *Store) Mode() Mode { return f.brk.mode() }

// callTimeout returns the bound of the next Redis call named call (see
// store.Timeout.For).
func (f *Store) callTimeout(call string) time.Duration { return f.timeout.For(call) }

// answered records that Redis answered a call named call (see
// store.Timeout.For). The outage store marks every call's answer, as it
// marks the first reservation's (MarkWarm); the Redis store it wraps reads
// the same bounds.
func (f *Store) answered(call string, err error) {
	if err == nil {
		f.timeout.Answered(call)
	}
}

// shareNow returns this replica's share of each rule during an outage.
func (f *Store) shareNow() float64 {
	if f.share > 0 {
		return f.share
	}
	if s, ok := f.countedShare(); ok {
		return s
	}
	return 1 / float64(max(f.assumed, 1))
}

// countedShare returns 1 / the live replicas, and false while the
// heartbeat has no count it trusts (f.fleet returns 0).
func (f *Store) countedShare() (float64, bool) {
	if f.fleet == nil {
		return 0, false
	}
	live := f.fleet()
	if live <= 0 {
		return 0, false
	}
	return 1 / float64(live), true
}

func (f *Store) Reserve(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	now := f.clock.Now()
	try, probe, cause := f.brk.allow(now)
	if try {
		r, err := f.reserveShared(ctx, bs, maxWait, probe)
		f.called(ctx, "reserve", bs, now, err)
		if err == nil {
			f.timeout.MarkWarm()
			done := f.clock.Now()
			if f.brk.success(done, probe) && f.outage == Fallback {
				f.graceUntil.Store(done.Add(returnGrace).UnixNano())
			}
			var grace bookingID
			if until := f.graceUntil.Load(); until != 0 {
				r, grace = f.inGrace(done, until, r, maxWait)
			}
			if r.OK {
				r.Undo = f.passOn(r.Undo, grace)
				f.bookedShared(done.Add(max(r.Wait, 0)))
				if f.outage == Fallback {
					f.local.shadowBook(done, done.Add(max(r.Wait, 0)), r.Buckets)
				}
			}
			return r, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The caller gave up; Redis is not to blame.
			f.brk.release(probe)
			return store.Reservation{}, errors.Join(err, ctxErr)
		}
		f.brk.failure(f.clock.Now(), probe, err)
		cause = err
		now = f.clock.Now()
	}
	switch f.outage {
	case FailOpen:
		return store.Reservation{OK: true, Buckets: bs, Unreported: true}, nil
	case FailClosed:
		return store.Reservation{}, fmt.Errorf("%w: %w", store.ErrUnavailable, cause)
	}
	share := f.shareNow()
	if bits := math.Float64bits(share); f.outageShare.Load() != bits {
		f.outageShare.Store(bits)
	}
	lb := f.local.reserveFor(now, localRequest{bs: bs, maxWait: maxWait, share: share, emptyUntil: time.Unix(0, f.sharedUntil.Load())})
	r := store.Reservation{OK: lb.ok, Wait: lb.wait, Limiter: lb.limiter, Buckets: bs, Unreported: true}
	if lb.id != 0 {
		r.Undo = localBooking{f, lb.id}
	}
	return r, nil
}

// bookedShared records that a request booked in the shared bucket departs
// at depart (see sharedUntil).
func (f *Store) bookedShared(depart time.Time) {
	d := depart.UnixNano()
	for {
		cur := f.sharedUntil.Load()
		if d <= cur || f.sharedUntil.CompareAndSwap(cur, d) {
			return
		}
	}
}

// localBooking is the undo of a waiting booking in the outage's local buckets:
// its name there. A value: copies name the same booking, and cancelBooking
// finds it once.
type localBooking struct {
	f  *Store
	id bookingID
}

func (h localBooking) Cancel(context.Context) error {
	h.f.local.cancelBooking(h.f.clock.Now(), h.id)
	return nil
}

// sharedBooking is the undo of a reservation the outage store passes on
// from Redis: it gives back the Redis booking (shared, Redis's own undo)
// within the call timeout while the breaker is closed, and the local slot
// the request also booked during a grace period (grace, or 0), while it
// lasts. A Redis booking that takes a gate and has no grace slot needs
// none (see passOn).
type sharedBooking struct {
	f      *Store
	shared store.Undo
	grace  bookingID
	done   atomic.Bool
}

// passOn returns the undo of a reservation Redis made, shared (Redis's
// own), that the outage store passes on: shared itself, gated (see
// refundGate), when it takes a gate and no local slot of a grace period
// goes with it; else a sharedBooking around it.
func (f *Store) passOn(shared store.Undo, grace bookingID) store.Undo {
	if g, ok := shared.(store.Gated); ok && grace == 0 {
		return g.Gated((*refundGate)(f))
	}
	return &sharedBooking{f: f, shared: shared, grace: grace}
}

func (u *sharedBooking) Cancel(ctx context.Context) error {
	if u.done.Swap(true) {
		return nil
	}
	f := u.f
	if u.grace != 0 && f.graceUntil.Load() != 0 {
		f.local.cancelBooking(f.clock.Now(), u.grace)
	}
	if u.shared == nil {
		return nil
	}
	return (*refundGate)(f).Refund(ctx, u.shared.Cancel)
}

// refundGate runs the refunds of Redis bookings (store.Gate): while the
// breaker is closed, within the call timeout; a failure counts against
// Redis. A pointer to the Store, so a gated undo costs no allocation.
type refundGate Store

func (g *refundGate) Refund(ctx context.Context, refund func(context.Context) error) error {
	f := (*Store)(g)
	if !f.brk.closed() {
		// The slot is in a Redis that does not answer: it stays spent
		// there, which errs on the side of the limit.
		return nil
	}
	_, err := bounded(ctx, f.callTimeout(store.CallRefund), f.guard, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, refund(ctx)
	}, nil)
	f.answered(store.CallRefund, err)
	if err != nil && ctx.Err() == nil {
		f.brk.failure(f.clock.Now(), false, err)
	}
	return err
}

// graceShare returns the share the grace period runs the local buckets
// at: the outage's, unless a trusted count of the fleet now gives a
// smaller one. The assumed fleet (store.DefaultFleetSize) is no count:
// right after a restart, and after an outage longer than the heartbeat's
// TTL, the replicas beat again one by one and the count is untrusted
// until a second beat (redisstore's heartbeat), and taking the assumed
// fleet's share then held a fleet of 4 at 200/s to 112–181/s for the
// grace period's first second (faulttest, 4 × 8, Redis stalled 10 s),
// where its outage share gave each replica its quarter.
func (f *Store) graceShare() float64 {
	out := math.Float64frombits(f.outageShare.Load())
	if out <= 0 || f.share > 0 {
		return f.shareNow()
	}
	if s, ok := f.countedShare(); ok && s < out {
		return s
	}
	return out
}

// inGrace applies the grace period after a return to the shared bucket to
// r, a reservation Redis just made at now. Replicas return one by one (each
// at its own probe, go-redis redials at most once a second): those back
// first would spend the whole shared rate while the others still spend
// their local share. So until the grace period (returnGrace) is over, a
// request also books its slot in its local share bucket, the limiter of the
// outage still carrying what it spent, and departs at the later of the
// two: a replica spends at most its share until the whole fleet books in
// Redis again. When the local slot is the later one, the shared slot is
// used late by that much, at most the request's maxWait (beyond it the
// local slot yields, see localBuckets.reserveGrace). After the grace
// period, the next request of each bucket books what its local limiter
// spent and has not earned back, as on the return, waiting slots
// included, and drops the limiter. It returns r, and the name of the local
// booking of a request that waits for it, or 0.
func (f *Store) inGrace(now time.Time, until int64, r store.Reservation, maxWait time.Duration) (store.Reservation, bookingID) {
	if now.UnixNano() >= until {
		if f.graceUntil.CompareAndSwap(until, 0) {
			f.local.unsettle(now)
		}
		return r, 0
	}
	if !r.OK || len(r.Buckets) == 0 {
		return r, 0
	}
	lb := f.local.reserveGrace(now, &r, maxWait, f.graceShare())
	if lb.ok && lb.wait > r.Wait {
		r.Wait, r.Limiter = lb.wait, lb.limiter
	}
	if lb.ok {
		return r, lb.id
	}
	return r, 0
}

// reserveShared books bs in Redis. The first booking of a bucket after an
// outage also books what this replica spent locally and has not yet
// recovered (its debt), so the fleet does not spend a burst locally and
// then a second one from the shared bucket.
//
// A probe's or a grace period's settled limiters stay (see inGrace).
func (f *Store) reserveShared(ctx context.Context, bs []store.Bucket, maxWait time.Duration, probe bool) (store.Reservation, error) {
	withDebt, debts := f.local.takeDebts(f.clock.Now(), bs)
	if withDebt == nil {
		withDebt = bs
	}
	r, err := f.callReserve(ctx, withDebt, maxWait)
	switch {
	case err != nil:
		f.local.releaseDebts(debts)
		return store.Reservation{}, err
	case debts != nil:
		f.local.settleDebts(debts, probe || f.graceUntil.Load() != 0)
	}
	if !r.OK && len(bs) > 0 && &withDebt[0] != &bs[0] {
		// The debt pushed the wait beyond what the request accepts: the
		// request must not fail for it, so it is booked alone and the
		// debt forgotten.
		if r, err = f.callReserve(ctx, bs, maxWait); err != nil {
			return store.Reservation{}, err
		}
	}
	r.Buckets = bs // the Transport's view; the costs differ only by the debt
	return r, nil
}

// callReserve runs one reserve on Redis within the timeout. A reservation
// that arrives after the caller gave up on it is cancelled, so an abandoned
// call books nothing (unless the cancel itself fails).
func (f *Store) callReserve(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, error) {
	if f.reserveKept {
		// The primary keeps the timeout (and refunds a booking its caller
		// left at it): a context here would cost five allocations a
		// request (the timer context, its timer, closures and channel).
		return f.primary.Reserve(ctx, bs, maxWait)
	}
	timeout := f.timeout.Next()
	if !f.guard {
		// unguarded, not bounded: its call does not escape, so the
		// closure costs no allocation on every request's path.
		return unguarded(ctx, timeout, func(ctx context.Context) (store.Reservation, error) {
			return f.primary.Reserve(ctx, bs, maxWait)
		})
	}
	return bounded(ctx, timeout, true, func(ctx context.Context) (store.Reservation, error) {
		return f.primary.Reserve(ctx, bs, maxWait)
	}, func(r store.Reservation) {
		_, _ = bounded(context.Background(), f.timeout.Next(), false, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.Cancel(ctx)
		}, nil)
	})
}

func (f *Store) Pause(ctx context.Context, bs []store.Bucket, d time.Duration) error {
	if f.brk.closed() {
		start := f.clock.Now()
		_, err := bounded(ctx, f.callTimeout(store.CallPause), f.guard, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, f.primary.Pause(ctx, bs, d)
		}, nil)
		f.answered(store.CallPause, err)
		f.called(ctx, "pause", bs, start, err)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		f.brk.failure(f.clock.Now(), false, err)
	}
	if f.outage == Fallback {
		// The server's word holds for this replica's local buckets too.
		f.local.pause(f.clock.Now(), bs, d, f.shareNow())
	}
	return nil
}

// Limit passes a cap to the shared buckets. During an outage it is
// dropped: the local buckets run at this replica's share of the rule,
// already below it, and the shared bucket learns again from the next
// responses once Redis is back.
func (f *Store) Limit(ctx context.Context, b store.Bucket, c store.Cap) (store.Stretch, error) {
	if !f.brk.closed() {
		return store.Stretch{}, nil
	}
	start := f.clock.Now()
	st, err := bounded(ctx, f.callTimeout(store.CallLimit), f.guard, func(ctx context.Context) (store.Stretch, error) {
		return f.primary.Limit(ctx, b, c)
	}, nil)
	f.answered(store.CallLimit, err)
	f.calledOne(ctx, "limit", b.Rule, start, err)
	if err != nil && ctx.Err() == nil {
		f.brk.failure(f.clock.Now(), false, err)
	}
	return st, err
}

// Held asks the shared buckets; during an outage this replica's own
// pauses (listen) are all it knows, and they hold its waiters already.
func (f *Store) Held(ctx context.Context, bs []store.Bucket) (time.Duration, error) {
	if !f.brk.closed() {
		return 0, nil
	}
	start := f.clock.Now()
	d, err := bounded(ctx, f.callTimeout(store.CallHold), f.guard, func(ctx context.Context) (time.Duration, error) {
		return f.primary.Held(ctx, bs)
	}, nil)
	f.answered(store.CallHold, err)
	f.called(ctx, "held", bs, start, err)
	if err != nil && ctx.Err() == nil {
		f.brk.failure(f.clock.Now(), false, err)
	}
	return d, err
}

// unguarded runs call with ctx bounded by timeout, on the caller's
// goroutine: the call keeps the bound only if it honours ctx.
func unguarded[T any](ctx context.Context, timeout time.Duration, call func(context.Context) (T, error)) (T, error) {
	cctx, cancel := store.BoundContext(ctx, timeout)
	defer cancel()
	v, err := call(cctx)
	return v, timedOut(cctx, timeout, err)
}

// bounded runs call with ctx bounded by timeout. With guard set, call runs
// on a goroutine of its own and bounded returns at the timeout even if call
// does not; if call's result arrives after that, abandoned (when not nil)
// receives it, on that goroutine.
func bounded[T any](ctx context.Context, timeout time.Duration, guard bool, call func(context.Context) (T, error), abandoned func(T)) (T, error) {
	if !guard {
		return unguarded(ctx, timeout, call)
	}
	cctx, cancel := store.BoundContext(ctx, timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	const pending, delivered, gaveUp = 0, 1, 2
	var state atomic.Int32
	done := make(chan result, 1)
	go func() {
		v, err := call(cctx)
		done <- result{v, err}
		if !state.CompareAndSwap(pending, delivered) && err == nil && abandoned != nil {
			abandoned(v)
		}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-cctx.Done():
		if !state.CompareAndSwap(pending, gaveUp) {
			// The result came in just now: take it.
			res := <-done
			return res.v, res.err
		}
		var zero T
		if context.Cause(cctx) == store.ErrTimeout {
			return zero, fmt.Errorf("%w after %v", store.ErrTimeout, timeout)
		}
		return zero, context.Cause(cctx)
	}
}

// Timing of the breaker and of the return to the shared bucket (see
// docs/OUTAGES.md).
const (
	// probeEvery is the breaker's half-open probe interval: while Redis is
	// unreachable, one request in this interval tries it. Short enough that
	// the fleet is back on the shared bucket well within 2 s of Redis
	// answering again (a probe can fail on a connection the restart broke,
	// and the next one comes 250 ms later); long enough that a stalled Redis
	// costs only one request in this interval its timeout.
	probeEvery = 250 * time.Millisecond

	// returnGrace is how long after its return to the shared bucket a
	// replica in Fallback still also respects its local share bucket.
	// The replicas of a fleet return one by one, each at its own probe
	// after go-redis's next redial (at most once a second), so the last is
	// back about 1 s + probeEvery after the first; until then those still
	// local spend their share outside Redis's count, and those back must
	// not spend the whole shared rate on top. 2 s covers that spread with
	// margin, and costs little: for 2 s a replica gets at most its share.
	returnGrace = 2 * time.Second
)

// Options is what an outage store is made with: the outage options of the
// Transport (WithOutageMode, WithFleetShare, WithOnModeChange) and what it
// learns from the store it wraps.
type Options struct {
	// Mode is the outage mode: Fallback (also for the zero value Local),
	// FailOpen or FailClosed.
	Mode Mode
	// Share is this replica's share of each rule in Fallback; 0 means one
	// over the fleet size (Fleet, or store.DefaultFleetSize before it counts).
	Share float64
	// OnChange, if not nil, is told of every change of mode, on a
	// goroutine of its own, in order.
	OnChange func(Change)
	// Timeout is the bound of the calls, shared with the primary; nil
	// means store.NewTimeout(DefaultTimeout).
	Timeout *store.Timeout
	// Fleet returns the live replicas counted by the heartbeat (0 before
	// the count settles); nil when there is none.
	Fleet func() int64
	// OnCall, if not nil, is told of every call made to the primary, as
	// it ends: which ("reserve", "pause", "limit", "held", "charge",
	// "quota"), the rule of its first bucket, how long it took by the
	// clock, and its error (nil when the primary answered). It runs on the
	// caller's goroutine and must not block. A call the breaker keeps from
	// being made is not one.
	OnCall func(ctx context.Context, call, rule string, d time.Duration, err error)
	// Guard says whether each Redis call needs a goroutine to keep its
	// timeout (the client ignores context deadlines); ReserveKept, that
	// the primary bounds its reserve calls by Timeout by itself whatever
	// the client, marking the calls it ends store.ErrTimeout, and refunds
	// a booking whose reply comes after it gave up (the Redis store, its
	// batcher or its client keeping the bound, unless requests split), so
	// they need no context or goroutine of the outage store's.
	Guard, ReserveKept bool
}

// DefaultTimeout is the bound of the calls when Options.Timeout is nil:
// the root's DefaultRedisTimeout.
const DefaultTimeout = 50 * time.Millisecond

// New wraps primary (the Redis store, or a test's stand-in) with the outage
// behaviour o sets, on clock c.
func New(primary store.Store, c Clock, o Options) *Store {
	if o.Mode == Local {
		o.Mode = Fallback
	}
	if o.Timeout == nil {
		o.Timeout = store.NewTimeout(DefaultTimeout)
	}
	n := &notifier{fn: o.OnChange}
	return &Store{
		opts:        o,
		primary:     primary,
		clock:       c,
		timeout:     o.Timeout,
		guard:       o.Guard,
		reserveKept: o.ReserveKept,
		outage:      o.Mode,
		brk:         newBreaker(probeEvery, o.Mode, n),
		local:       newLocalBuckets(c.Now()),
		fleet:       o.Fleet,
		share:       o.Share,
		assumed:     store.DefaultFleetSize,
		onCall:      o.OnCall,
	}
}

// called tells Options.OnCall of a call to the primary for bs that
// started at start and ended now with err.
func (f *Store) called(ctx context.Context, call string, bs []store.Bucket, start time.Time, err error) {
	if f.onCall != nil && len(bs) > 0 {
		f.calledOne(ctx, call, bs[0].Rule, start, err)
	}
}

// calledOne is called for a call of one bucket, of rule.
func (f *Store) calledOne(ctx context.Context, call, rule string, start time.Time, err error) {
	if f.onCall != nil {
		f.onCall(ctx, call, rule, f.clock.Now().Sub(start), err)
	}
}

// Options returns the options s was made with, defaults filled in.
func (f *Store) Options() Options { return f.opts }

// Primary returns the store s wraps.
func (f *Store) Primary() store.Store { return f.primary }

// Guarded reports whether s runs each call to the primary on a goroutine
// of its own (Options.Guard).
func (f *Store) Guarded() bool { return f.guard }

// timedOut marks err as store.ErrTimeout when cctx, bounded by timeout
// (store.BoundContext), ended for that reason.
func timedOut(cctx context.Context, timeout time.Duration, err error) error {
	if err != nil && context.Cause(cctx) == store.ErrTimeout {
		return fmt.Errorf("%w after %v: %w", store.ErrTimeout, timeout, err)
	}
	return err
}

var _ store.Charger = (*Store)(nil)

// Charge passes a charge (or refund) to the shared bucket, with the
// request's mark (a reservation booked locally has none: its refund gives
// no credit). During an
// outage a charge goes to this replica's local bucket instead, which
// booked the request (the charge of a request booked before the switch is
// then counted locally, which errs towards the limit), and a refund is
// dropped: a rate.Limiter cannot be given back tokens outside the
// reservation that took them.
func (f *Store) Charge(ctx context.Context, b store.Bucket, units, mark int64) error {
	if !f.brk.closed() {
		if f.outage == Fallback {
			f.local.charge(f.clock.Now(), b, units, f.shareNow())
		}
		return nil
	}
	c, ok := f.primary.(store.Charger)
	if !ok {
		return nil
	}
	start := f.clock.Now()
	_, err := bounded(ctx, f.callTimeout(store.CallCharge), f.guard, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.Charge(ctx, b, units, mark)
	}, nil)
	f.answered(store.CallCharge, err)
	f.calledOne(ctx, "charge", b.Rule, start, err)
	if err != nil && ctx.Err() == nil {
		f.brk.failure(f.clock.Now(), false, err)
	}
	return err
}

// Quotas reads the room of bs in the shared store while it is reachable
// (see store.QuotaReader), within the call bound; in an outage mode, or
// when the read fails, it returns ErrNoQuota: the outage buckets keep no
// room a server's headers could tell. A failed read does not open the
// breaker: only reservations judge Redis's health.
func (f *Store) Quotas(ctx context.Context, bs []store.Bucket) ([]store.Quota, error) {
	qr, ok := f.primary.(store.QuotaReader)
	if !ok || f.brk.mode() != Shared {
		return nil, ErrNoQuota
	}
	start := f.clock.Now()
	q, err := bounded(ctx, f.callTimeout(store.CallQuota), f.guard, func(cctx context.Context) ([]store.Quota, error) { return qr.Quotas(cctx, bs) }, nil)
	f.answered(store.CallQuota, err)
	f.called(ctx, "quota", bs, start, err)
	if err != nil {
		return nil, errors.Join(ErrNoQuota, err)
	}
	return q, nil
}

// ErrNoQuota reports that Quotas could not read the buckets' room.
var ErrNoQuota = errors.New("throttle: no quota read")

var _ store.QuotaReader = (*Store)(nil)
