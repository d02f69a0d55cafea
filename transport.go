package throttle

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// Transport is an [http.RoundTripper] that makes each request wait for its
// slot in the buckets of the rules it matches before handing it to a base
// RoundTripper.
//
// A Transport is safe for concurrent use by multiple goroutines, and should
// be reused: its buckets live in it (or, with [WithRedis], in Redis). Make
// one with [New] or [NewTransport]. The zero Transport is a pass-through:
// it has no rules, and sends every request through [http.DefaultTransport]
// as it is, without waiting, reading the response or retrying.
//
// It keeps the RoundTripper contract: it never modifies the request it is
// given, it closes the request's body on every path where the base
// transport does not, and it returns the base transport's response and error
// as they are. The caller closes the response body, as with any
// RoundTripper.
type Transport struct {
	base  http.RoundTripper
	rules []*compiledRule
	store store.Store
	// leases holds the concurrency caps' leases (concurrency.go); nil when
	// no rule has a Concurrency.
	leases lease.Store
	// closeLeases stops the lease store's background work (Close).
	closeLeases func() error
	// beat registers this replica with the Redis store's heartbeat, for
	// requests that book no bucket there (see redisstore.Store.Beat).
	beat  func(context.Context) error
	queue *waitQueue
	// views is this process's reading of the server's quotas.
	views *feedback.Views
	// pauses hears the pauses the other replicas publish (with Redis).
	pauses pauseWatch
	clock  Clock
	// obs receives the Transport's events; nil without one (observer.go).
	obs Observer

	maxWait       time.Duration
	dialects      []header.Dialect
	maxRetryAfter time.Duration
	retry         RetryPolicy
	noFeedback    bool
	actualCosts   bool // a rule reads its requests' actual cost (cost.go)
	// anchoring is set when a rule learns its windows' anchor from the
	// server's resets, the longest such rule's Period in maxAnchorPeriod
	// (anchor.go).
	anchoring       bool
	maxAnchorPeriod time.Duration
	err             error // a configuration error, returned by every RoundTrip
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport sending requests through base once their slot has
// come, or the first configuration error: an invalid rule is reported with
// a [*RuleError] naming the rule and the field, an invalid option value
// with an [*OptionError]. A nil base means [http.DefaultTransport]; nil
// options are ignored. Without options the Transport has no rules: it
// sends every request at once, still reading responses and retrying
// rate-limited ones (see [RetryPolicy]). New may be called from any
// goroutine, and the same options may make several Transports.
func New(base http.RoundTripper, opts ...Option) (*Transport, error) {
	t := NewTransport(base, opts...)
	return t, t.err
}

// NewTransport is like [New] for use in an expression such as
// &http.Client{Transport: throttle.NewTransport(nil, ...)}. It never panics:
// if the configuration is invalid, every RoundTrip of the returned Transport
// fails with the configuration error, which [Transport.Err] also returns.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	t := &Transport{
		base:          base,
		clock:         cfg.clock,
		maxWait:       cfg.maxWait,
		queue:         newWaitQueue(cfg.maxQueue),
		views:         feedback.NewViews(),
		dialects:      cfg.dialects,
		maxRetryAfter: cfg.maxRetryAfter,
		retry:         cfg.retry.withDefaults(),
		noFeedback:    cfg.noFeedback,
		obs:           newObserver(cfg.observers),
	}
	if t.err = errors.Join(cfg.errs...); t.err != nil {
		return t
	}
	if t.rules, t.err = compileRules(cfg.rules, cfg.headroom); t.err != nil {
		return t
	}
	for _, c := range t.rules {
		t.actualCosts = t.actualCosts || c.ActualCost != nil
		if c.anchored() {
			t.anchoring = true
			t.maxAnchorPeriod = max(t.maxAnchorPeriod, c.Limit.Period)
		}
	}
	cfg.redis.outage.onChange = observeModes(t.obs, cfg.redis.outage.onChange)
	cfg.onStoreCall = t.storeCalls()
	var rs *redisstore.Store
	if cfg.redis.rdb != nil {
		var os *outage.Store
		if os, rs, t.err = newRedisOutageStore(&cfg); t.err != nil {
			return t
		}
		t.store = os
		t.views.CountFleet(rs.Counted)
		if !cfg.noFeedback {
			t.pauses.watch = func() func() {
				return rs.Watch(redisstore.Listener{Pause: t.heardPause, Stretch: t.heardStretch})
			}
		}
	} else {
		t.store = newLocalStore(cfg.clock)
	}
	if anyConcurrency(t.rules) {
		t.leases, t.closeLeases = newLeaseStore(&cfg, rs)
		if rs != nil {
			t.beat = rs.Beat
		}
	}
	return t
}

// Err returns the Transport's configuration error, or nil (always nil for
// the zero Transport). It is safe for concurrent use.
func (t *Transport) Err() error { return t.err }

// RoundTrip waits for the request's slot in every bucket it needs, then
// sends it through the base transport, and reads the response's rate-limit
// headers (see [header.Parse]) to pause the fleet's buckets when the server
// asks for it.
//
// It fails without sending when the slot lies beyond the context's deadline
// or the maximum wait ([*WaitError]), when a bucket has too many waiters
// ([*QueueFullError]), when a rule cannot admit the request's cost
// ([*RuleError]), or when the context ends while waiting (the context's
// error; the slot is given back). A request that fails this way books
// nothing.
//
// A rate-limited response is retried as the retry policy says (see
// [RetryPolicy]): only requests that can be replayed safely, each retry
// after the server's wait or a backoff, and in a fresh slot. The rejected
// response is drained and closed before the retry. When retries run out,
// or a retry could not get its slot in time, the last response is returned
// as it is, with a nil error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		closeBody(req)
		return nil, t.err
	}
	if t.store == nil {
		// The zero Transport: every Transport New makes has a store.
		return http.DefaultTransport.RoundTrip(req)
	}
	t.pauses.ensure()
	var bs []store.Bucket
	if _, inProcess := t.store.(*localstore.Store); inProcess {
		p := bucketSlices.Get().(*[]store.Bucket)
		bs = (*p)[:0]
		defer func() {
			clear(bs)
			*p = bs[:0]
			bucketSlices.Put(p)
		}()
	}
	ctx := t.observed(req.Context(), req)
	bs, err := t.buckets(bs, req)
	if err != nil {
		t.observeRejected(ctx, bs, err)
		closeBody(req)
		return nil, err
	}
	bk, err := t.acquire(ctx, bs)
	if err != nil {
		t.observeRejected(ctx, bs, err)
		closeBody(req)
		return nil, err
	}
	release := noLeases
	var cs []lease.Cap
	if t.leases != nil {
		if cs = t.caps(req); len(cs) > 0 {
			if release, bk, err = t.takeLeases(ctx, cs, bs, bk); err != nil {
				t.observeRejected(ctx, bs, err)
				closeBody(req)
				return nil, err
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		release()
		return resp, err
	}
	// start is when the first response came: listen reads the clock then,
	// and the retries' elapsed time counts from it.
	var start time.Time
	var bo backoffState
	for attempt := 1; ; attempt++ {
		t.chargeActual(ctx, bs, bk.Marks, resp)
		sig, now := t.listen(ctx, bs, bk, resp, len(cs) > 0)
		if len(cs) > 0 {
			t.adaptLeases(ctx, cs, sig)
		}
		if attempt == 1 {
			start = now
		}
		if attempt >= t.retry.MaxAttempts || !t.retry.ShouldRetry(resp, sig) || !bodyReplayable(req) || !t.retry.Replayable(req) {
			return t.answer(resp, release), nil
		}
		delay, ok := t.retryDelay(ctx, sig, &bo, start)
		if !ok {
			return t.answer(resp, release), nil
		}
		t.observeRetry(ctx, bs, attempt+1, delay)
		freeConn(resp)
		// The leases stay held through the retry: the request is still
		// the caller's one request in flight.
		var next *http.Request
		next, bk, err = t.retryAfter(ctx, req, bs, delay)
		if err != nil {
			t.observeRejected(ctx, bs, err)
			// No retry could be made in time: the caller gets the
			// server's answer, untouched.
			return t.answer(resp, release), nil
		}
		drainAndClose(resp)
		resp, err = t.base.RoundTrip(next)
		if err != nil {
			release()
			return resp, err
		}
	}
}

// answer returns resp to the caller, its body holding the request's leases
// until it is closed or read to its end.
func (t *Transport) answer(resp *http.Response, release func()) *http.Response {
	if t.leases != nil {
		holdLeases(resp, release)
	}
	return resp
}

// retryAfter waits delay, then for a fresh slot, and returns a copy of req
// with a fresh body, ready to be sent again, and its booking. On error
// nothing is booked.
func (t *Transport) retryAfter(ctx context.Context, req *http.Request, bs []store.Bucket, delay time.Duration) (*http.Request, feedback.Booking, error) {
	if err := sleep(ctx, t.clock, delay); err != nil {
		return nil, feedback.Booking{}, err
	}
	bk, err := t.acquire(ctx, bs)
	if err != nil {
		return nil, feedback.Booking{}, err
	}
	next := req.Clone(ctx)
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			// The slot stays booked: it was spent on a request that
			// could not be rebuilt, which is rare and costs one slot.
			return nil, feedback.Booking{}, err
		}
		next.Body = body
	}
	return next, bk, nil
}

// bucketSlices recycles the bucket slices of requests through the local
// store, which keeps nothing of them once RoundTrip returns: they were one
// of the two allocations of such a request. The Redis store may keep
// them (a call it gave up on at its timeout still runs with them, and
// refunds the booking when the reply comes), so its requests get their own.
var bucketSlices = sync.Pool{New: func() any { return new([]store.Bucket) }}

// buckets appends to bs the buckets request r needs: one per matching rule.
func (t *Transport) buckets(bs []store.Bucket, r *http.Request) ([]store.Bucket, error) {
	for i, c := range t.rules {
		if !c.rated() || !c.Match.Matches(r) {
			continue
		}
		if cap(bs) == 0 {
			// Room for every rule left, so that a request matching several
			// costs one allocation.
			bs = make([]store.Bucket, 0, len(t.rules)-i)
		}
		cost := c.cost(r)
		if cost > c.burst {
			return nil, &RuleError{Rule: c.Name, Field: "Cost", Reason: "request costs more than the burst, so it can never be admitted"}
		}
		bs = append(bs, store.Bucket{Key: c.bucketKey(r), Rule: c.Name, Interval: c.interval, Burst: c.burst, Cost: cost, Lateness: c.lateness, Corrected: c.ActualCost != nil, Rate: int64(c.Limit.Rate), Period: c.window, Headroom: c.headroom, Algorithm: c.algorithm, Edge: c.edge})
		if c.anchored() {
			bs[len(bs)-1].Anchor = c.anchors.get(bs[len(bs)-1].Key)
		}
	}
	return bs, nil
}

// acquire books the request's slot and waits for it.
//
// A waiter that wakes later than its slot by more than the buckets'
// lateness tolerance (the jitter the headroom pays for) does not go: the
// process stalled (a GC pause, a starved CPU) while the rest of the fleet
// kept to its slots, and sending now would add a burst the bucket never
// allowed. It books a new slot instead, once; the stalled slot is lost
// capacity.
//
// A request whose buckets disagree by more than a bucket's lateness
// tolerance (one endpoint's queue is deep, the account-wide bucket has room)
// is booked in two steps: the slowest buckets now, the others when it
// departs (see store.Reservation.Deferred).
func (t *Transport) acquire(ctx context.Context, bs []store.Bucket) (feedback.Booking, error) {
	if len(bs) == 0 {
		return feedback.Booking{}, nil
	}
	var err error
	for attempt := 0; attempt < maxAcquireAttempts; {
		var bk feedback.Booking
		bk, err = t.acquireOnce(ctx, bs, attempt < maxAcquireAttempts-1)
		switch {
		case errors.Is(err, errHeld):
			// Each round waits out the pause in its reservation, so the
			// request's budget bounds the rounds.
		case errors.Is(err, errLate):
			attempt++
		default:
			return bk, err
		}
	}
	return feedback.Booking{}, err
}

// maxAcquireAttempts bounds the times a request books again after waking
// late; the last attempt goes late rather than fail.
const maxAcquireAttempts = 3

var (
	// errLate reports a waiter that woke too long after its slot.
	errLate = errors.New("throttle: woke too late for the slot")
	// errHeld reports a waiter whose slot a pause set since its booking
	// covers (see acquireOnce).
	errHeld = errors.New("throttle: the slot is in a pause")
)

func (t *Transport) acquireOnce(ctx context.Context, bs []store.Bucket, mayBeLate bool) (feedback.Booking, error) {
	if err := ctx.Err(); err != nil {
		return feedback.Booking{}, err
	}
	budget, reason := t.budget(ctx)
	if err := t.queue.full(bs); err != nil {
		return feedback.Booking{}, err
	}
	sent := t.clock.Now()
	t.views.Take(bs, sent.UnixNano())
	r, err := t.store.Reserve(ctx, bs, budget)
	if err != nil {
		t.views.Untake(bs, nil, sent.UnixNano())
		return feedback.Booking{}, err
	}
	t.views.Untake(bs, &r, sent.UnixNano())
	if r.Held > 0 {
		// Another replica was told to pause these buckets: this process's
		// waiters booked before the pause book again after it, as if the
		// response had come here (see listen). Its end is reckoned from
		// before the call, as listen's, so it comes no later than the
		// store's.
		t.queue.hold(bs, sent, sent.Add(r.Held))
	}
	// The wait counts from when the store decided, somewhere between the
	// call and its reply; half the round trip is the unbiased guess. Without
	// it every departure would be late by the reply's latency, and late by
	// different amounts on a loaded machine, which bunches departures. A
	// call that waited in the store's queue (r.Queued, behind the calls on
	// the wire) was decided no earlier than that wait after it: the guess
	// is half the rest. Taken from the whole round trip, half the queue's
	// wait would make its departure that much early, every queued request
	// of a busy replica at once: under the race detector that is several
	// milliseconds, a slot of a rule of 100/s (the likely cause of the
	// rejection a fleet of four met 26 ms into internal/algorithmtest's
	// token cell in CI, its rule one slot within the server's bucket;
	// not reproduced on a quiet host). The local store decides within
	// the call, in this process: no reply to wait for, and no second
	// reading of the clock (a tenth of the request's cost on some VMs).
	now := sent
	if _, inProcess := t.store.(*localstore.Store); !inProcess {
		now = t.clock.Now()
		rtt := now.Sub(sent)
		queued := min(max(r.Queued, 0), rtt)
		r.Wait -= queued + (rtt-queued)/2
	}
	if !r.OK {
		return feedback.Booking{}, waitError(&r, budget, reason)
	}
	bk := feedback.Booking{Depart: now.Add(max(r.Wait, 0)).UnixNano(), Counts: r.Counts, Marks: r.Marks}
	if r.Wait > 0 {
		// The slots before this one were booked from the later of now
		// and the end of a pause in force (the store books after it).
		bk.QueueFrom = now.Add(max(r.Held, 0)).UnixNano()
	}
	t.views.Booked(bs, &r, sent.UnixNano(), now.UnixNano())
	// departed is when the request leaves: now, unless it waited.
	departed := now
	if r.Wait > 0 {
		if err := t.queue.enter(bs); err != nil {
			t.giveBack(ctx, r)
			return feedback.Booking{}, err
		}
		t.observeQueue(ctx, &r, true)
		defer t.queue.leave(bs)
		tolerance := anyLateness
		if mayBeLate {
			tolerance = lateness(bs)
		}
		slot, err := t.queue.depart(ctx, t.clock, bs, r.Wait, tolerance, sent.Add(budget))
		t.observeQueue(ctx, &r, false)
		if errors.Is(err, errStretched) {
			// A cut stretched the slot beyond what the request allows:
			// as if the store had answered so at the booking.
			t.giveBack(ctx, r)
			r.Wait = slot.Sub(sent)
			return feedback.Booking{}, waitError(&r, budget, reason)
		}
		if err != nil {
			// Late or cancelled, the slot goes back where it is still the
			// last one booked: a late request then books again at the
			// time it really leaves, which the bucket counts right, and
			// only a slot with bookings behind it is lost.
			t.giveBack(ctx, r)
			return feedback.Booking{}, err
		}
		if err := t.checkHeld(ctx, bs); err != nil {
			t.giveBack(ctx, r)
			return feedback.Booking{}, err
		}
		departed = t.clock.Now()
		bk.Depart = slot.UnixNano()
	}
	if rest := r.Rest(); len(rest) > 0 {
		if err := t.bookDeferred(ctx, rest); err != nil {
			t.giveBack(ctx, r)
			return feedback.Booking{}, err
		}
		departed = t.clock.Now()
	}
	t.views.Departed(bs, departed.UnixNano())
	if t.obs != nil {
		t.reportAcquired(ctx, &r, departed, departed.Sub(sent))
	}
	return bk, nil
}

// checkHeld asks the store, for a waiter about to depart shortly after a
// pause of its buckets, whether another replica was told of a new pause
// since: a fleet probing a refusal would otherwise send one request per
// replica into each pause, each replica learning of it only from its own
// rejection. If so, it holds this process's waiters and returns errHeld.
// A store that cannot answer lets the waiter go.
func (t *Transport) checkHeld(ctx context.Context, bs []store.Bucket) error {
	now := t.clock.Now()
	if !t.views.Recheck(bs, now.UnixNano()) {
		return nil
	}
	held, err := t.store.Held(ctx, bs)
	if err != nil || held <= 0 {
		return nil
	}
	t.queue.hold(bs, now, now.Add(held))
	t.views.Paused(bs, now.Add(held).UnixNano(), now.UnixNano())
	return errHeld
}

// bookDeferred books, at the departure, the buckets a reservation deferred
// (rest), waiting for their slots as long as the request's budget allows.
// The buckets booked before then see the request leave that much later
// than they counted: a deferred bucket usually has room (it was deferred
// because its slot came early), and when it has none the request queues in
// it like any other rather than give up the slot it holds. Each round books
// at least the slowest of rest, so it ends.
func (t *Transport) bookDeferred(ctx context.Context, rest []store.Bucket) error {
	for len(rest) > 0 {
		budget, reason := t.budget(ctx)
		r, err := t.store.Reserve(ctx, rest, budget)
		if err != nil {
			return err
		}
		if !r.OK {
			return waitError(&r, budget, reason)
		}
		if err := sleep(ctx, t.clock, r.Wait); err != nil {
			t.giveBack(ctx, r)
			return err
		}
		rest = r.Rest()
	}
	return nil
}

// budget returns how long a request may wait for its slot, and the reason
// to give when that is not long enough.
func (t *Transport) budget(ctx context.Context) (time.Duration, error) {
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(t.clock.Now()); left < t.maxWait {
			return max(left, 0), ErrBeyondDeadline
		}
	}
	return t.maxWait, ErrBeyondMaxWait
}

// lateness returns the least lateness tolerance of bs.
func lateness(bs []store.Bucket) time.Duration {
	d := bs[0].Lateness
	for _, b := range bs[1:] {
		d = min(d, b.Lateness)
	}
	return d
}

// giveBack cancels a reservation that will not be used. The cancel must run
// even though ctx may be done, so it runs without ctx's cancellation. r comes
// by value so that only this rare path moves a reservation to the heap, not
// every acquire; a copy cancels the same booking (see store.Reservation.Cancel).
func (t *Transport) giveBack(ctx context.Context, r store.Reservation) {
	// A failed cancel costs one slot and nothing else; there is no caller
	// left to tell.
	_ = r.Cancel(context.WithoutCancel(ctx))
}

// CloseIdleConnections closes the idle connections of the base transport
// ([http.DefaultTransport] for the zero Transport), if it has such a
// method. It is safe for concurrent use.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if ci, ok := base.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// closeBody closes the request's body, as a RoundTripper must on every path
// where it does not hand the request to another RoundTripper.
func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}
