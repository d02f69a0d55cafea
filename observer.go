package throttle

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/store"
)

// This file is what a Transport tells of its decisions: the [Event]s, the
// [Observer] that receives them ([WithObserver]), and the Transport's calls
// that make them. Every call starts with a test of t.obs, so a Transport
// without an observer builds no event, reads no clock and allocates
// nothing for it (BenchmarkRoundTripObserved). The logger of [WithLogger]
// is one more observer (log.go); otelthrottle and promthrottle are others.

// Observer receives the [Event]s of a Transport (see [WithObserver]).
//
// Observe is called from the goroutines of concurrent requests (and, for
// [EventModeChange], from the outage store's reporting goroutine), so it
// must be safe for concurrent use. It is never called under a lock of the
// Transport, but it is called on the request's path: it should return
// quickly (count, log, hand off). It must not panic. The Event is a value
// that it may keep.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer]. A nil ObserverFunc is not
// a valid Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// WithObserver adds o to the observers of the Transport: o receives every
// [Event] of every request. Several WithObserver (and [WithLogger]) options
// add several observers, called one after the other in the order given. A
// nil o is ignored. Without an observer, the Transport makes no events and
// costs nothing for them.
//
// Observer is an interface of one method, rather than a struct of optional
// functions, so that one value receives every kind of event, new kinds
// included, and an exporter (otelthrottle, promthrottle) is one option.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	})
}

// EventKind says what an [Event] reports. The zero EventKind is no event;
// the Transport never sends it.
type EventKind int

const (
	// EventAcquired: a request got its slot in every bucket it needs and
	// leaves now. Wait is how long it waited for it (0 when at once),
	// Rule the rule whose bucket set the wait. Sent for the first attempt
	// and for every retry.
	EventAcquired EventKind = iota + 1
	// EventRejected: a request failed without being sent (or a retry was
	// not sent): Reason says why, Err is the error, Rule the rule
	// concerned, Wait the wait it would have needed when known.
	EventRejected
	// EventQueued: a request starts waiting for its slot, in this
	// process, for Wait. Each EventQueued is followed by one
	// EventDequeued of the same request.
	EventQueued
	// EventDequeued: a request stops waiting for its slot, whether it
	// leaves, books again or gives up.
	EventDequeued
	// EventRateLimited: a response said the request was rejected for
	// rate (see [header.Signal.Limited]). Status is its status code, Wait
	// the wait the server named (HasWait when it named one), ServerReason
	// the server's reason and Scope its scope, when it gave them, and
	// Dialect the provider's dialect that recognised the response (see
	// [WithDialects]), when one did.
	EventRateLimited
	// EventPaused: a response paused a bucket for the whole fleet: Rule
	// is the bucket's rule, Wait the pause.
	EventPaused
	// EventCapped: the model of the server's limiter (docs/FEEDBACK.md)
	// capped a bucket at what the server leaves the fleet: Rule is the
	// bucket's rule, CapRate the rate (units of cost per second) the
	// fleet now runs at in it (0: counting only, no cap), Remaining what
	// the server reported left (HasRemaining when it did), the least of
	// its quotas.
	EventCapped
	// EventRetry: a rate-limited request will be sent again after Wait;
	// Attempt is the attempt about to be made (2 for the first retry).
	EventRetry
	// EventLeaseAcquired: a request took its lease in the concurrency cap
	// of Rule (see [Rule.Concurrency]), after waiting Wait.
	EventLeaseAcquired
	// EventLeaseReleased: a request gave its lease back in the cap of
	// Rule; Wait is how long it held it.
	EventLeaseReleased
	// EventLeaseLost: a lease in the cap of Rule expired in the store
	// before it was released (its renewals failed for a TTL), so the
	// slot may already be another's. Wait is how long it had been held.
	EventLeaseLost
	// EventModeChange: the Transport's [Mode] changed from From to To
	// (see [ModeChange]); Err is the failure that caused a switch to an
	// outage mode, nil on the way back. It carries no request: Method,
	// Host and Rule are empty.
	EventModeChange
	// EventStoreCall: a call to Redis (see [WithRedis]) ended: Call names
	// it ("reserve", "pause", "limit", "held", "charge"), Wait is how long
	// it took by the Transport's clock, Err its error (nil when Redis
	// answered), Rule the rule of its first bucket. A call the outage mode
	// keeps from being made (Redis is down, see [WithOutageMode]) is not
	// one; an answer that came too late is one, with an Err. Nearly every
	// request makes one ("reserve"); a Transport without Redis makes none.
	EventStoreCall
	// EventQuota: a response reported a quota of a bucket that the fleet
	// counts (docs/FEEDBACK.md), and this is the reading beside the
	// fleet's own count of it: Limit and Remaining (HasRemaining) are the
	// server's, of the quota with the least remaining; Window the
	// quota's window as the model reads it; Estimate what the fleet's own
	// count leaves of Limit, that is Limit less what the fleet's replicas
	// reported sent in the Window before the request left, as this
	// process knows it. Estimate − Remaining is what the model takes for
	// others' spending: another consumer of the quota, or the lag of the
	// replicas' reports. The count is of the trailing Window, as a
	// sliding window's; against a fixed window the two also differ by
	// what the fleet sent in the Window before the window's start. Rule
	// is the bucket's rule. Sent for every such response, whether or not
	// the model acts on it ([EventCapped] says when it does), once the
	// fleet's count of the bucket covers a whole Window: not for the
	// first window's answers, nor with [WithoutFeedback].
	EventQuota
)

var eventKindNames = [...]string{
	EventAcquired:      "acquired",
	EventRejected:      "rejected",
	EventQueued:        "queued",
	EventDequeued:      "dequeued",
	EventRateLimited:   "rate_limited",
	EventPaused:        "paused",
	EventCapped:        "capped",
	EventRetry:         "retry",
	EventLeaseAcquired: "lease_acquired",
	EventLeaseReleased: "lease_released",
	EventLeaseLost:     "lease_lost",
	EventModeChange:    "mode_change",
	EventStoreCall:     "store_call",
	EventQuota:         "quota",
}

// String returns the kind's name in snake case, e.g. "rate_limited", or
// "EventKind(n)" for a value that names no kind.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// RejectReason says why a request was rejected ([EventRejected]). The zero
// RejectReason is no rejection.
type RejectReason int

const (
	// RejectBeyondDeadline: the slot lay beyond the context's deadline
	// ([ErrBeyondDeadline]).
	RejectBeyondDeadline RejectReason = iota + 1
	// RejectBeyondMaxWait: the slot lay beyond the maximum wait
	// ([ErrBeyondMaxWait]).
	RejectBeyondMaxWait
	// RejectQueueFull: the bucket had too many waiters ([ErrQueueFull]).
	RejectQueueFull
	// RejectRule: a rule cannot admit the request ([*RuleError]: a cost
	// above the burst).
	RejectRule
	// RejectStoreUnavailable: Redis was unreachable and the Transport
	// fails closed ([ErrStoreUnavailable]).
	RejectStoreUnavailable
	// RejectCanceled: the request's context ended while it waited.
	RejectCanceled
	// RejectOther: any other error (a lease store closed, a body that
	// could not be rebuilt for a retry).
	RejectOther
)

var rejectReasonNames = [...]string{
	RejectBeyondDeadline:   "beyond_deadline",
	RejectBeyondMaxWait:    "beyond_max_wait",
	RejectQueueFull:        "queue_full",
	RejectRule:             "rule",
	RejectStoreUnavailable: "store_unavailable",
	RejectCanceled:         "canceled",
	RejectOther:            "other",
}

// String returns the reason's name in snake case, e.g. "queue_full", or
// "RejectReason(n)" for a value that names no reason.
func (r RejectReason) String() string {
	if r > 0 && int(r) < len(rejectReasonNames) {
		return rejectReasonNames[r]
	}
	return "RejectReason(" + strconv.Itoa(int(r)) + ")"
}

// Event is one decision of a Transport, as an [Observer] receives it: a
// plain value, safe to copy and to keep. Which fields are set depends on
// Kind (see each [EventKind]); the others are zero.
//
// An Event never carries a secret: of the request it has the method and
// the URL's host only (no path, no query, no header), and of a bucket its
// rule's name only (never the partition key, nor its hash).
type Event struct {
	Kind EventKind
	// At is when it happened, by the Transport's clock (see [WithClock]).
	At time.Time

	// Method and Host are the request's method ("GET" when empty) and its
	// URL's host (with the port, if the URL had one).
	Method, Host string
	// Rule is the name of the rule concerned. For an event of the request
	// rather than of one bucket (EventRateLimited, EventRetry), it is the
	// first rule the request matched; empty when it matched none.
	Rule string

	// Wait is the event's duration: see each EventKind.
	Wait time.Duration
	// HasWait reports, for EventRateLimited, that the server named a wait.
	HasWait bool

	// Reason is why a request was rejected (EventRejected).
	Reason RejectReason
	// Err is the error of EventRejected, or the failure that caused an
	// EventModeChange to an outage mode.
	Err error

	// Status is the response's status code (EventRateLimited).
	Status int
	// ServerReason and Scope are the server's reason for a rejection and
	// the scope of its limit, as it gave them (see [header.Signal]); empty
	// when it gave none. They are the server's words, not this package's:
	// exporters should not make them metric attributes.
	ServerReason, Scope string
	// Dialect is the name of the provider's dialect that recognised a
	// rate-limited response (EventRateLimited): "stripe", "github", ...
	// (see [header.Signal.Dialect]); empty when none did, as for a
	// response that carried only the standard fields. Unlike
	// ServerReason it is a constant of a dialect's code, a short name
	// that exporters may make an attribute: its values are as few as the
	// Transport's dialects.
	Dialect string

	// Attempt is the attempt a retry is about to make (EventRetry).
	Attempt int

	// CapRate is the rate a bucket is capped at (EventCapped), in units of
	// cost per second.
	CapRate float64
	// Remaining is what the server reported left of its quota
	// (EventCapped, EventQuota); HasRemaining reports that it did.
	Remaining    int64
	HasRemaining bool
	// Limit is the server's limit of the quota, Window its window and
	// Estimate what the fleet's own count leaves of Limit (EventQuota).
	Limit    int64
	Window   time.Duration
	Estimate float64

	// From and To are the modes of an EventModeChange.
	From, To Mode

	// Call names the call of an EventStoreCall.
	Call string
}

// multiObserver calls each of its observers in turn.
type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// newObserver returns the one observer of a Transport configured with os,
// or nil for none.
func newObserver(os []Observer) Observer {
	switch len(os) {
	case 0:
		return nil
	case 1:
		return os[0]
	}
	return multiObserver(append([]Observer(nil), os...))
}

// observedCtx is a request's context carrying what its events tell of it,
// so that the steps deep in the request's path (acquireOnce, listen) can
// name it. Only a Transport with an observer makes one: one allocation per
// request.
type observedCtx struct {
	context.Context
	method, host string
}

type observedKey struct{}

func (c *observedCtx) Value(key any) any {
	if key == (observedKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// observed returns ctx, carrying r's method and host when the Transport
// has an observer.
func (t *Transport) observed(ctx context.Context, r *http.Request) context.Context {
	if t.obs == nil {
		return ctx
	}
	m := r.Method
	if m == "" {
		m = http.MethodGet
	}
	return &observedCtx{Context: ctx, method: m, host: r.URL.Host}
}

// observe sends e, with the request of ctx, to the observer.
func (t *Transport) observe(ctx context.Context, e Event) {
	if oc, ok := ctx.Value(observedKey{}).(*observedCtx); ok {
		e.Method, e.Host = oc.method, oc.host
	}
	t.obs.Observe(e)
}

// firstRule returns the rule of bs's first bucket, or "".
func firstRule(bs []store.Bucket) string {
	if len(bs) == 0 {
		return ""
	}
	return bs[0].Rule
}

// reportAcquired reports a slot of r's buckets taken at at after a wait.
// Its caller tests t.obs: a wrapper taking two times would not be inlined
// on the hot path.
func (t *Transport) reportAcquired(ctx context.Context, r *store.Reservation, at time.Time, wait time.Duration) {
	t.observe(ctx, Event{Kind: EventAcquired, At: at, Rule: r.Buckets[r.Limiter].Rule, Wait: max(wait, 0)})
}

// observeQueue reports a request entering (in) or leaving the wait queue of
// r's buckets.
func (t *Transport) observeQueue(ctx context.Context, r *store.Reservation, in bool) {
	if t.obs != nil {
		t.reportQueue(ctx, r, in)
	}
}

func (t *Transport) reportQueue(ctx context.Context, r *store.Reservation, in bool) {
	e := Event{Kind: EventDequeued, At: t.clock.Now(), Rule: r.Buckets[r.Limiter].Rule}
	if in {
		e.Kind, e.Wait = EventQueued, r.Wait
	}
	t.observe(ctx, e)
}

// observeRejected reports a request of buckets bs failing with err before
// it was sent.
func (t *Transport) observeRejected(ctx context.Context, bs []store.Bucket, err error) {
	if t.obs != nil && err != nil {
		t.reportRejected(ctx, bs, err)
	}
}

func (t *Transport) reportRejected(ctx context.Context, bs []store.Bucket, err error) {
	e := Event{Kind: EventRejected, At: t.clock.Now(), Rule: firstRule(bs), Err: err, Reason: RejectOther}
	var we *WaitError
	var qe *QueueFullError
	var re *RuleError
	switch {
	case errors.As(err, &we):
		e.Rule, e.Wait, e.Reason = we.Rule, we.Wait, RejectBeyondMaxWait
		if errors.Is(we.Err, ErrBeyondDeadline) {
			e.Reason = RejectBeyondDeadline
		}
	case errors.As(err, &qe):
		e.Rule, e.Reason = qe.Rule, RejectQueueFull
	case errors.As(err, &re):
		e.Rule, e.Reason = re.Rule, RejectRule
	case errors.Is(err, ErrStoreUnavailable):
		e.Reason = RejectStoreUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.Reason = RejectCanceled
	}
	t.observe(ctx, e)
}

// observeResponse reports a response, read at now, that was rate limited.
func (t *Transport) observeResponse(ctx context.Context, bs []store.Bucket, resp *http.Response, sig header.Signal, now time.Time) {
	if t.obs != nil && sig.Limited {
		t.reportResponse(ctx, bs, resp, sig, now)
	}
}

func (t *Transport) reportResponse(ctx context.Context, bs []store.Bucket, resp *http.Response, sig header.Signal, now time.Time) {
	t.observe(ctx, Event{Kind: EventRateLimited, At: now, Rule: firstRule(bs), Status: resp.StatusCode,
		Wait: sig.RetryAfter, HasWait: sig.HasRetryAfter, ServerReason: sig.Reason, Scope: sig.Scope, Dialect: sig.Dialect})
}

// observePause reports every bucket of bs paused for d at now.
func (t *Transport) observePause(ctx context.Context, bs []store.Bucket, d time.Duration, now time.Time) {
	if t.obs != nil {
		t.reportPause(ctx, bs, d, now)
	}
}

func (t *Transport) reportPause(ctx context.Context, bs []store.Bucket, d time.Duration, now time.Time) {
	for _, b := range bs {
		t.observe(ctx, Event{Kind: EventPaused, At: now, Rule: b.Rule, Wait: d})
	}
}

// observeCap reports bucket b capped at c after a response said sig.
func (t *Transport) observeCap(ctx context.Context, b store.Bucket, c store.Cap, sig header.Signal, now time.Time) {
	if t.obs != nil {
		t.reportCap(ctx, b, c, sig, now)
	}
}

func (t *Transport) reportCap(ctx context.Context, b store.Bucket, c store.Cap, sig header.Signal, now time.Time) {
	e := Event{Kind: EventCapped, At: now, Rule: b.Rule, CapRate: c.Rate}
	for _, q := range sig.Quotas {
		if q.HasRemaining && (!e.HasRemaining || q.Remaining < e.Remaining) {
			e.Remaining, e.HasRemaining = q.Remaining, true
		}
	}
	t.observe(ctx, e)
}

// observeQuota reports the readings of the quotas sig reports beside the
// fleet's count of them (feedback.Views.Estimates): only for an observer,
// since the reading takes the views' lock.
func (t *Transport) observeQuota(ctx context.Context, bs []store.Bucket, bk feedback.Booking, sig header.Signal, now time.Time) {
	if t.obs != nil && len(sig.Quotas) > 0 && len(bs) > 0 {
		t.reportQuota(ctx, bs, bk, sig, now)
	}
}

func (t *Transport) reportQuota(ctx context.Context, bs []store.Bucket, bk feedback.Booking, sig header.Signal, now time.Time) {
	for _, e := range t.views.Estimates(bs, bk, sig, now.UnixNano()) {
		t.observe(ctx, Event{Kind: EventQuota, At: now, Rule: bs[e.Bucket].Rule,
			Limit: e.Limit, Remaining: e.Remaining, HasRemaining: true, Window: e.Window,
			Estimate: e.Left})
	}
}

// observeRetry reports a retry, the attempt-th sending, after delay.
func (t *Transport) observeRetry(ctx context.Context, bs []store.Bucket, attempt int, delay time.Duration) {
	if t.obs != nil {
		t.reportRetry(ctx, bs, attempt, delay)
	}
}

func (t *Transport) reportRetry(ctx context.Context, bs []store.Bucket, attempt int, delay time.Duration) {
	t.observe(ctx, Event{Kind: EventRetry, At: t.clock.Now(), Rule: firstRule(bs), Attempt: attempt, Wait: delay})
}

// observeLease reports lease l in caps cs, taken at start+waited, and
// returns the function that gives it back: l.Release, or, with an
// observer, one that reports the release too. With an observer a goroutine
// watches the lease until it is released, to report its loss.
func (t *Transport) observeLease(ctx context.Context, cs []lease.Cap, l *lease.Lease, start time.Time, waited time.Duration) func() {
	if t.obs == nil {
		return l.Release
	}
	ctx = context.WithoutCancel(ctx)
	took := start.Add(waited)
	for _, c := range cs {
		t.observe(ctx, Event{Kind: EventLeaseAcquired, At: took, Rule: c.Rule, Wait: waited})
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-l.Lost():
			now := t.clock.Now()
			for _, c := range cs {
				t.observe(ctx, Event{Kind: EventLeaseLost, At: now, Rule: c.Rule, Wait: now.Sub(took)})
			}
		case <-done:
		}
	}()
	return func() {
		l.Release()
		close(done)
		now := t.clock.Now()
		for _, c := range cs {
			t.observe(ctx, Event{Kind: EventLeaseReleased, At: now, Rule: c.Rule, Wait: now.Sub(took)})
		}
	}
}

// observeModes returns the outage store's report of mode changes: fn's,
// and the observer's when there is one.
func observeModes(obs Observer, fn func(ModeChange)) func(ModeChange) {
	if obs == nil {
		return fn
	}
	return func(c ModeChange) {
		if fn != nil {
			fn(c)
		}
		obs.Observe(Event{Kind: EventModeChange, At: c.At, From: c.From, To: c.To, Err: c.Err})
	}
}

// storeCalls returns the outage store's report of its calls to Redis as
// EventStoreCall, or nil without an observer: then the store reads no
// clock for them.
func (t *Transport) storeCalls() func(context.Context, string, string, time.Duration, error) {
	if t.obs == nil {
		return nil
	}
	return func(ctx context.Context, call, rule string, d time.Duration, err error) {
		t.observe(ctx, Event{Kind: EventStoreCall, At: t.clock.Now(), Rule: rule, Wait: d, Err: err, Call: call})
	}
}
