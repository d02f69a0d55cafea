// Package promthrottle records the events of a [throttle.Transport] as
// Prometheus metrics, for users who do not run OpenTelemetry.
//
// [New] returns a [*Collector]: give it to [throttle.WithObserver] and
// register it with a [prometheus.Registerer]. Its metrics are those of
// package otelthrottle, named the Prometheus way:
//
//	throttle_rate_limiting_requests_total                counter    rule, result, reason
//	throttle_rate_limiting_request_time_in_queue_seconds histogram  rule
//	throttle_rate_limiting_queued_requests               gauge      rule
//	throttle_rate_limiting_active_request_leases         gauge      rule
//	throttle_rate_limiting_request_lease_duration_seconds histogram rule
//	throttle_rate_limiting_lost_request_leases_total     counter    rule
//	throttle_server_rate_limited_total                   counter    rule, status, dialect
//	throttle_server_pauses_total                         counter    rule
//	throttle_server_pause_duration_seconds               histogram  rule
//	throttle_server_quota_remaining                      gauge      rule
//	throttle_fleet_quota_remaining                       gauge      rule
//	throttle_fleet_cap_rate                              gauge      rule
//	throttle_retries_total                               counter    rule
//	throttle_store_fallback_active                       gauge      mode
//	throttle_store_mode_changes_total                    counter    mode
//	throttle_store_call_duration_seconds                 histogram  call, result
//
// throttle_server_quota_remaining is what the provider last reported left
// of its quota, and throttle_fleet_quota_remaining what the fleet's own
// count leaves of it ([throttle.EventQuota]): their gap is what the fleet
// takes for others' spending on the same quota.
//
// result is "acquired", "rejected" or "canceled", reason the
// [throttle.RejectReason] of a request not acquired ("" otherwise).
// dialect is the name of the provider's dialect that recognised a
// rate-limited response ([throttle.Event.Dialect]: "stripe", "github",
// ...), "" when none did. Every label has a bounded set of values (rule
// and dialect names, results, reasons, status codes, modes): no URL,
// host, header, server's reason or partition key is a label.
package promthrottle

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/histogram"
)

// Collector records a Transport's events and is a [prometheus.Collector]
// of them. Make one with [New]; the zero Collector is not usable. It is
// safe for concurrent use; one Collector may serve several Transports
// (their counts add up by rule name), and is registered once.
type Collector struct {
	requests      *prometheus.CounterVec
	timeInQueue   *prometheus.HistogramVec
	queued        *prometheus.GaugeVec
	leases        *prometheus.GaugeVec
	leaseDuration *prometheus.HistogramVec
	leasesLost    *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
	pauses        *prometheus.CounterVec
	pauseDuration *prometheus.HistogramVec
	remaining     *prometheus.GaugeVec
	estimate      *prometheus.GaugeVec
	capRate       *prometheus.GaugeVec
	retries       *prometheus.CounterVec
	fallback      *prometheus.GaugeVec
	modeChanges   *prometheus.CounterVec
	storeCalls    *prometheus.HistogramVec
}

var (
	_ throttle.Observer    = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// New returns a Collector, not yet registered.
func New() *Collector {
	rule := []string{"rule"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: histogram.Waits()}, rule)
	}
	return &Collector{
		requests:      counter("throttle_rate_limiting_requests_total", "Requests that asked for their slot, by result.", "rule", "result", "reason"),
		timeInQueue:   hist("throttle_rate_limiting_request_time_in_queue_seconds", "Time a request that queued waited for its slot."),
		queued:        gauge("throttle_rate_limiting_queued_requests", "Requests waiting for their slot in this process.", rule...),
		leases:        gauge("throttle_rate_limiting_active_request_leases", "Concurrency leases held by this process.", rule...),
		leaseDuration: hist("throttle_rate_limiting_request_lease_duration_seconds", "Time a concurrency lease was held."),
		leasesLost:    counter("throttle_rate_limiting_lost_request_leases_total", "Concurrency leases that expired in the store before their release.", rule...),
		rateLimited:   counter("throttle_server_rate_limited_total", "Responses the provider rejected for rate.", "rule", "status", "dialect"),
		pauses:        counter("throttle_server_pauses_total", "Fleet-wide pauses of a bucket that a response asked for.", rule...),
		pauseDuration: hist("throttle_server_pause_duration_seconds", "Length of the fleet-wide pauses."),
		remaining:     gauge("throttle_server_quota_remaining", "What the provider last reported left of its quota.", rule...),
		estimate:      gauge("throttle_fleet_quota_remaining", "What the fleet's own count leaves of the provider's quota: its limit less what the fleet sent in its window.", rule...),
		capRate:       gauge("throttle_fleet_cap_rate", "The rate (units of cost per second) the feedback model caps a bucket at (0: counting, no cap).", rule...),
		retries:       counter("throttle_retries_total", "Retries of rate-limited requests.", rule...),
		fallback:      gauge("throttle_store_fallback_active", "1 while the shared store is unreachable and the Transport runs in this outage mode, else 0.", "mode"),
		modeChanges:   counter("throttle_store_mode_changes_total", "Changes of the Transport's mode, by the mode changed to.", "mode"),
		storeCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "throttle_store_call_duration_seconds",
			Help: "Time of the calls to Redis, by call and result (ok, error).", Buckets: histogram.StoreCalls()}, []string{"call", "result"}),
	}
}

func (c *Collector) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.timeInQueue, c.queued, c.leases, c.leaseDuration, c.leasesLost,
		c.rateLimited, c.pauses, c.pauseDuration, c.remaining, c.estimate, c.capRate, c.retries, c.fallback, c.modeChanges, c.storeCalls}
}

// Describe sends the descriptors of every metric (see
// [prometheus.Collector]).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect sends every metric's current value (see [prometheus.Collector]).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// Observe records e. It is called by the Transport (see
// [throttle.Observer]).
func (c *Collector) Observe(e throttle.Event) {
	switch e.Kind {
	case throttle.EventAcquired:
		c.requests.WithLabelValues(e.Rule, "acquired", "").Inc()
		if e.Wait > 0 {
			c.timeInQueue.WithLabelValues(e.Rule).Observe(e.Wait.Seconds())
		}
	case throttle.EventRejected:
		result := "rejected"
		if e.Reason == throttle.RejectCanceled {
			result = "canceled"
		}
		c.requests.WithLabelValues(e.Rule, result, e.Reason.String()).Inc()
	case throttle.EventQueued:
		c.queued.WithLabelValues(e.Rule).Inc()
	case throttle.EventDequeued:
		c.queued.WithLabelValues(e.Rule).Dec()
	case throttle.EventLeaseAcquired:
		c.leases.WithLabelValues(e.Rule).Inc()
	case throttle.EventLeaseReleased:
		c.leases.WithLabelValues(e.Rule).Dec()
		c.leaseDuration.WithLabelValues(e.Rule).Observe(e.Wait.Seconds())
	case throttle.EventLeaseLost:
		c.leasesLost.WithLabelValues(e.Rule).Inc()
	case throttle.EventRateLimited:
		c.rateLimited.WithLabelValues(e.Rule, strconv.Itoa(e.Status), e.Dialect).Inc()
	case throttle.EventPaused:
		c.pauses.WithLabelValues(e.Rule).Inc()
		c.pauseDuration.WithLabelValues(e.Rule).Observe(e.Wait.Seconds())
	case throttle.EventCapped:
		if e.HasRemaining {
			c.remaining.WithLabelValues(e.Rule).Set(float64(e.Remaining))
		}
		c.capRate.WithLabelValues(e.Rule).Set(e.CapRate)
	case throttle.EventQuota:
		c.remaining.WithLabelValues(e.Rule).Set(float64(e.Remaining))
		c.estimate.WithLabelValues(e.Rule).Set(e.Estimate)
	case throttle.EventRetry:
		c.retries.WithLabelValues(e.Rule).Inc()
	case throttle.EventModeChange:
		if outage(e.From) {
			c.fallback.WithLabelValues(e.From.String()).Set(0)
		}
		if outage(e.To) {
			c.fallback.WithLabelValues(e.To.String()).Set(1)
		}
		c.modeChanges.WithLabelValues(e.To.String()).Inc()
	case throttle.EventStoreCall:
		result := "ok"
		if e.Err != nil {
			result = "error"
		}
		c.storeCalls.WithLabelValues(e.Call, result).Observe(e.Wait.Seconds())
	}
}

// outage reports whether m is one of the outage modes.
func outage(m throttle.Mode) bool {
	return m == throttle.ModeFallback || m == throttle.ModeFailOpen || m == throttle.ModeFailClosed
}
