// Package otelthrottle records the events of a [throttle.Transport] as
// OpenTelemetry metrics.
//
// [New] returns an [*Observer] to give to [throttle.WithObserver]. Its
// instruments follow the one stable OpenTelemetry convention for rate
// limiting, ASP.NET Core's aspnetcore.rate_limiting.*, under the prefix
// throttle.rate_limiting where they mean the same, and add what only an
// outbound throttler has under throttle.server (what the provider's answers
// said), throttle.fleet (what the fleet runs at) and throttle.store (the
// shared store's outages):
//
//	throttle.rate_limiting.requests                 counter    {request}  throttle.rule, throttle.rate_limiting.result, error.type
//	throttle.rate_limiting.request.time_in_queue    histogram  s          throttle.rule, throttle.rate_limiting.result
//	throttle.rate_limiting.queued_requests          updown     {request}  throttle.rule
//	throttle.rate_limiting.active_request_leases    updown     {request}  throttle.rule
//	throttle.rate_limiting.request_lease.duration   histogram  s          throttle.rule
//	throttle.rate_limiting.lost_request_leases      counter    {request}  throttle.rule
//	throttle.server.rate_limited                    counter    {response} throttle.rule, http.response.status_code, throttle.dialect
//	throttle.server.pauses                          counter    {pause}    throttle.rule
//	throttle.server.pause.duration                  histogram  s          throttle.rule
//	throttle.server.quota.remaining                 gauge      {unit}     throttle.rule
//	throttle.fleet.quota.remaining                  gauge      {unit}     throttle.rule
//	throttle.fleet.cap.rate                         gauge      {unit}/s   throttle.rule
//	throttle.retries                                counter    {retry}    throttle.rule
//	throttle.store.fallback.active                  gauge      1          throttle.mode
//	throttle.store.mode_changes                     counter    {change}   throttle.mode
//	throttle.store.call.duration                    histogram  s          throttle.store.call, error.type
//
// throttle.server.quota.remaining is what the provider last reported left
// of its quota, and throttle.fleet.quota.remaining what the fleet's own
// count leaves of it ([throttle.EventQuota]): their gap is what the fleet
// takes for others' spending on the same quota (another consumer, or the
// lag of the replicas' reports).
//
// throttle.dialect names the provider's dialect that recognised a
// rate-limited response ([throttle.Event.Dialect]: "stripe", "github",
// ...); a response that no dialect recognised has no throttle.dialect.
//
// Every attribute has a bounded set of values: the names of the
// Transport's rules and of its dialects, the results and reasons of
// [throttle.RejectReason], status codes, and the modes of
// [throttle.Mode]. No URL, host, header, server's reason or partition key
// becomes an attribute. The result of a request is
// "acquired", "rejected" or "canceled" (ASP.NET Core's request_canceled);
// error.type is the [throttle.RejectReason] of a rejected or canceled one.
package otelthrottle

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/histogram"
)

// ScopeName is the instrumentation scope of the Observer's meter.
const ScopeName = "github.com/throttlekit/throttle/otelthrottle"

// Attribute keys of the instruments.
const (
	// RuleKey is the rule's name ([throttle.Rule.Name]).
	RuleKey = attribute.Key("throttle.rule")
	// ResultKey is a request's result: "acquired", "rejected" or
	// "canceled".
	ResultKey = attribute.Key("throttle.rate_limiting.result")
	// ReasonKey is the [throttle.RejectReason] of a request not acquired,
	// under OpenTelemetry's general error.type.
	ReasonKey = attribute.Key("error.type")
	// StatusKey is a rate-limited response's status code.
	StatusKey = attribute.Key("http.response.status_code")
	// DialectKey is the name of the dialect that recognised a rate-limited
	// response ([throttle.Event.Dialect]), absent when none did.
	DialectKey = attribute.Key("throttle.dialect")
	// ModeKey is a [throttle.Mode]'s name ("fallback", "shared", ...).
	ModeKey = attribute.Key("throttle.mode")
	// CallKey names a call to Redis ([throttle.EventStoreCall]): "reserve",
	// "pause", "limit", "held", "charge". A failed call also has ReasonKey
	// "error".
	CallKey = attribute.Key("throttle.store.call")
)

// Observer records a Transport's events in OpenTelemetry instruments. Make
// one with [New]; the zero Observer is not usable. It is safe for
// concurrent use, and one Observer may serve several Transports (their
// measurements add up, by rule name).
type Observer struct {
	requests      metric.Int64Counter
	timeInQueue   metric.Float64Histogram
	queued        metric.Int64UpDownCounter
	leases        metric.Int64UpDownCounter
	leaseDuration metric.Float64Histogram
	leasesLost    metric.Int64Counter
	rateLimited   metric.Int64Counter
	pauses        metric.Int64Counter
	pauseDuration metric.Float64Histogram
	remaining     metric.Int64Gauge
	estimate      metric.Float64Gauge
	capRate       metric.Float64Gauge
	retries       metric.Int64Counter
	fallback      metric.Int64Gauge
	modeChanges   metric.Int64Counter
	storeCalls    metric.Float64Histogram

	// sets caches the attribute sets by their values, so that a
	// measurement allocates none (a sync.Map would box each key).
	mu   sync.RWMutex
	sets map[attrKey]metric.MeasurementOption
}

var _ throttle.Observer = (*Observer)(nil)

// attrKey names one attribute set.
type attrKey struct {
	rule, result, reason, mode, call, dialect string
	status                                    int
}

// New returns an Observer whose instruments come from mp's meter of
// [ScopeName], or the first error of making one. A nil mp is an error.
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		return nil, errNilProvider
	}
	m := mp.Meter(ScopeName)
	o := &Observer{sets: map[attrKey]metric.MeasurementOption{}}
	var errs []error
	c := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	ud := func(name, unit, desc string) metric.Int64UpDownCounter {
		i, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	h := func(name, desc string) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(histogram.Waits()...))
		errs = append(errs, err)
		return i
	}
	o.requests = c("throttle.rate_limiting.requests", "{request}", "Requests that asked for their slot, by result.")
	o.timeInQueue = h("throttle.rate_limiting.request.time_in_queue", "Time a request waited for its slot.")
	o.queued = ud("throttle.rate_limiting.queued_requests", "{request}", "Requests waiting for their slot in this process.")
	o.leases = ud("throttle.rate_limiting.active_request_leases", "{request}", "Concurrency leases held by this process.")
	o.leaseDuration = h("throttle.rate_limiting.request_lease.duration", "Time a concurrency lease was held.")
	o.leasesLost = c("throttle.rate_limiting.lost_request_leases", "{request}", "Concurrency leases that expired in the store before their release.")
	o.rateLimited = c("throttle.server.rate_limited", "{response}", "Responses the provider rejected for rate.")
	o.pauses = c("throttle.server.pauses", "{pause}", "Fleet-wide pauses of a bucket that a response asked for.")
	o.pauseDuration = h("throttle.server.pause.duration", "Length of the fleet-wide pauses.")
	var err error
	o.remaining, err = m.Int64Gauge("throttle.server.quota.remaining", metric.WithUnit("{unit}"),
		metric.WithDescription("What the provider last reported left of its quota."))
	errs = append(errs, err)
	o.estimate, err = m.Float64Gauge("throttle.fleet.quota.remaining", metric.WithUnit("{unit}"),
		metric.WithDescription("What the fleet's own count leaves of the provider's quota: its limit less what the fleet sent in its window."))
	errs = append(errs, err)
	o.capRate, err = m.Float64Gauge("throttle.fleet.cap.rate", metric.WithUnit("{unit}/s"),
		metric.WithDescription("The rate the feedback model caps a bucket at, from what the provider leaves the fleet (0: counting, no cap)."))
	errs = append(errs, err)
	o.retries = c("throttle.retries", "{retry}", "Retries of rate-limited requests.")
	o.fallback, err = m.Int64Gauge("throttle.store.fallback.active", metric.WithUnit("1"),
		metric.WithDescription("1 while the shared store is unreachable and the Transport runs in its outage mode, else 0."))
	errs = append(errs, err)
	o.modeChanges = c("throttle.store.mode_changes", "{change}", "Changes of the Transport's mode, by the mode changed to.")
	o.storeCalls, err = m.Float64Histogram("throttle.store.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of the calls to Redis, by call and result (ok, error)."),
		metric.WithExplicitBucketBoundaries(histogram.StoreCalls()...))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Observe records e. It is called by the Transport (see
// [throttle.Observer]).
func (o *Observer) Observe(e throttle.Event) {
	ctx := context.Background()
	switch e.Kind {
	case throttle.EventAcquired:
		o.requests.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule, result: "acquired"}))
		if e.Wait > 0 {
			// As ASP.NET Core's: the time of the requests that queued.
			o.timeInQueue.Record(ctx, e.Wait.Seconds(), o.attrs(attrKey{rule: e.Rule, result: "acquired"}))
		}
	case throttle.EventRejected:
		result := "rejected"
		if e.Reason == throttle.RejectCanceled {
			result = "canceled"
		}
		o.requests.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule, result: result, reason: e.Reason.String()}))
	case throttle.EventQueued:
		o.queued.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventDequeued:
		o.queued.Add(ctx, -1, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventLeaseAcquired:
		o.leases.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventLeaseReleased:
		o.leases.Add(ctx, -1, o.attrs(attrKey{rule: e.Rule}))
		o.leaseDuration.Record(ctx, e.Wait.Seconds(), o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventLeaseLost:
		o.leasesLost.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventRateLimited:
		o.rateLimited.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule, status: e.Status, dialect: e.Dialect}))
	case throttle.EventPaused:
		o.pauses.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule}))
		o.pauseDuration.Record(ctx, e.Wait.Seconds(), o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventCapped:
		if e.HasRemaining {
			o.remaining.Record(ctx, e.Remaining, o.attrs(attrKey{rule: e.Rule}))
		}
		o.capRate.Record(ctx, e.CapRate, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventQuota:
		o.remaining.Record(ctx, e.Remaining, o.attrs(attrKey{rule: e.Rule}))
		o.estimate.Record(ctx, e.Estimate, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventRetry:
		o.retries.Add(ctx, 1, o.attrs(attrKey{rule: e.Rule}))
	case throttle.EventModeChange:
		var active int64
		if outage(e.To) {
			active = 1
		}
		o.fallback.Record(ctx, active, o.attrs(attrKey{mode: e.To.String()}))
		if outage(e.From) {
			// The gauge of the mode left goes back to 0, so that a
			// dashboard summing the gauge sees one mode at a time.
			o.fallback.Record(ctx, 0, o.attrs(attrKey{mode: e.From.String()}))
		}
		o.modeChanges.Add(ctx, 1, o.attrs(attrKey{mode: e.To.String()}))
	case throttle.EventStoreCall:
		result := "ok"
		if e.Err != nil {
			result = "error"
		}
		o.storeCalls.Record(ctx, e.Wait.Seconds(), o.attrs(attrKey{call: e.Call, result: result}))
	}
}

// outage reports whether m is one of the outage modes.
func outage(m throttle.Mode) bool {
	return m == throttle.ModeFallback || m == throttle.ModeFailOpen || m == throttle.ModeFailClosed
}

// attrs returns the measurement option of the attribute set k names.
func (o *Observer) attrs(k attrKey) metric.MeasurementOption {
	o.mu.RLock()
	v, ok := o.sets[k]
	o.mu.RUnlock()
	if ok {
		return v
	}
	kvs := make([]attribute.KeyValue, 0, 4)
	if k.call != "" {
		kvs = append(kvs, CallKey.String(k.call))
		if k.result == "error" {
			kvs = append(kvs, ReasonKey.String("error"))
		}
		return o.store(k, kvs)
	}
	if k.mode != "" {
		kvs = append(kvs, ModeKey.String(k.mode))
	} else {
		kvs = append(kvs, RuleKey.String(k.rule))
	}
	if k.result != "" {
		kvs = append(kvs, ResultKey.String(k.result))
	}
	if k.reason != "" {
		kvs = append(kvs, ReasonKey.String(k.reason))
	}
	if k.status != 0 {
		kvs = append(kvs, StatusKey.Int(k.status))
	}
	if k.dialect != "" {
		kvs = append(kvs, DialectKey.String(k.dialect))
	}
	return o.store(k, kvs)
}

// store caches kvs as k's attribute set and returns it.
func (o *Observer) store(k attrKey, kvs []attribute.KeyValue) metric.MeasurementOption {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v, ok := o.sets[k]; ok {
		return v
	}
	v := metric.WithAttributeSet(attribute.NewSet(kvs...))
	o.sets[k] = v
	return v
}

var errNilProvider = errors.New("otelthrottle: New needs a MeterProvider, got nil")
