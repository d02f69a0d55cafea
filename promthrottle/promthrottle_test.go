package promthrottle_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/observertest"
	"github.com/throttlekit/throttle/promthrottle"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var ok = rtFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
})

// limitedOnce answers 429 with Retry-After: 2 to the first request, then
// as ok.
func limitedOnce() rtFunc {
	var mu sync.Mutex
	n := 0
	return func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"2"}}, Body: http.NoBody, Request: r}, nil
		}
		return ok(r)
	}
}

func newReq(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, "GET", "http://api.example/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCollectorDialect: a rate-limited response that a dialect recognised
// is counted under the dialect's name, one that none recognised under "";
// the server's reason is not a label.
func TestCollectorDialect(t *testing.T) {
	c := promthrottle.New()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	observertest.RateLimitedByDialect(t, c)
	const want = `
# HELP throttle_server_rate_limited_total Responses the provider rejected for rate.
# TYPE throttle_server_rate_limited_total counter
throttle_server_rate_limited_total{dialect="",rule="api",status="429"} 1
throttle_server_rate_limited_total{dialect="stripe",rule="api",status="429"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "throttle_server_rate_limited_total"); err != nil {
		t.Error(err)
	}
}

func TestCollector(t *testing.T) {
	c := promthrottle.New()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	tr, err := throttle.New(limitedOnce(), throttle.WithClock(clk), throttle.WithObserver(c), throttle.WithHeadroom(0),
		throttle.WithRules(
			throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}},
			throttle.Rule{Name: "inflight", Concurrency: 2}))
	if err != nil {
		t.Fatal(err)
	}
	// A 429 naming 2 s: a pause, and a retry after it.
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := tr.RoundTrip(newReq(t, context.Background()))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	clk.WaitTimers(1)
	clk.Advance(2 * time.Second)
	resp := <-done
	if v := gauge(t, reg, "throttle_rate_limiting_active_request_leases", "inflight"); v != 1 {
		t.Errorf("active leases %v while the body is open, want 1", v)
	}
	clk.Advance(500 * time.Millisecond)
	_ = resp.Body.Close()

	// A waiter: queued for 1 s.
	go func() {
		resp, err := tr.RoundTrip(newReq(t, context.Background()))
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- nil
	}()
	clk.WaitTimers(1)
	if v := gauge(t, reg, "throttle_rate_limiting_queued_requests", "api"); v != 1 {
		t.Errorf("queued %v while a request waits, want 1", v)
	}
	clk.Advance(time.Second)
	<-done

	// Canceled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.RoundTrip(newReq(t, ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	// A mode change, as the outage store reports it.
	c.Observe(throttle.Event{Kind: throttle.EventModeChange, From: throttle.ModeShared, To: throttle.ModeFallback})

	const want = `
# HELP throttle_rate_limiting_requests_total Requests that asked for their slot, by result.
# TYPE throttle_rate_limiting_requests_total counter
throttle_rate_limiting_requests_total{reason="",result="acquired",rule="api"} 3
throttle_rate_limiting_requests_total{reason="canceled",result="canceled",rule="api"} 1
# HELP throttle_rate_limiting_queued_requests Requests waiting for their slot in this process.
# TYPE throttle_rate_limiting_queued_requests gauge
throttle_rate_limiting_queued_requests{rule="api"} 0
# HELP throttle_rate_limiting_active_request_leases Concurrency leases held by this process.
# TYPE throttle_rate_limiting_active_request_leases gauge
throttle_rate_limiting_active_request_leases{rule="inflight"} 0
# HELP throttle_server_rate_limited_total Responses the provider rejected for rate.
# TYPE throttle_server_rate_limited_total counter
throttle_server_rate_limited_total{dialect="",rule="api",status="429"} 1
# HELP throttle_server_pauses_total Fleet-wide pauses of a bucket that a response asked for.
# TYPE throttle_server_pauses_total counter
throttle_server_pauses_total{rule="api"} 1
# HELP throttle_retries_total Retries of rate-limited requests.
# TYPE throttle_retries_total counter
throttle_retries_total{rule="api"} 1
# HELP throttle_store_fallback_active 1 while the shared store is unreachable and the Transport runs in this outage mode, else 0.
# TYPE throttle_store_fallback_active gauge
throttle_store_fallback_active{mode="fallback"} 1
# HELP throttle_store_mode_changes_total Changes of the Transport's mode, by the mode changed to.
# TYPE throttle_store_mode_changes_total counter
throttle_store_mode_changes_total{mode="fallback"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"throttle_rate_limiting_requests_total", "throttle_rate_limiting_queued_requests", "throttle_rate_limiting_active_request_leases",
		"throttle_server_rate_limited_total", "throttle_server_pauses_total", "throttle_retries_total",
		"throttle_store_fallback_active", "throttle_store_mode_changes_total"); err != nil {
		t.Error(err)
	}
	hs := map[string]float64{
		"throttle_rate_limiting_request_time_in_queue_seconds":  1, // the waits of the requests that queued
		"throttle_rate_limiting_request_lease_duration_seconds": 2.5,
		"throttle_server_pause_duration_seconds":                2,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if sum, ok := hs[mf.GetName()]; ok {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleSum() < sum || h.GetSampleSum() > sum+0.001 {
				t.Errorf("%s: sum %v, want %v", mf.GetName(), h.GetSampleSum(), sum)
			}
			delete(hs, mf.GetName())
		}
	}
	if len(hs) != 0 {
		t.Errorf("histograms missing: %v", hs)
	}
	if n := testutil.CollectAndCount(c); n < 10 {
		t.Errorf("%d series, want ≥ 10", n)
	}
}

// gauge returns the value of gauge name of rule in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, rule string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{rule=%q}", name, rule)
	return 0
}

func TestToFloat64(t *testing.T) {
	c := promthrottle.New()
	c.Observe(throttle.Event{Kind: throttle.EventCapped, Rule: "api", CapRate: 0.5, Remaining: 30, HasRemaining: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if v := gauge(t, reg, "throttle_server_quota_remaining", "api"); v != 30 {
		t.Errorf("remaining %v, want 30", v)
	}
	if v := gauge(t, reg, "throttle_fleet_cap_rate", "api"); v != 0.5 {
		t.Errorf("cap rate %v, want 0.5", v)
	}
	c.Observe(throttle.Event{Kind: throttle.EventQuota, Rule: "api", Limit: 100, Remaining: 12, HasRemaining: true, Window: time.Second, Estimate: 42})
	if v := gauge(t, reg, "throttle_server_quota_remaining", "api"); v != 12 {
		t.Errorf("remaining after a reading %v, want 12", v)
	}
	if v := gauge(t, reg, "throttle_fleet_quota_remaining", "api"); v != 42 {
		t.Errorf("fleet's remaining %v, want 42", v)
	}
	c.Observe(throttle.Event{Kind: throttle.EventModeChange, From: throttle.ModeFallback, To: throttle.ModeShared})
	c.Observe(throttle.Event{Kind: throttle.EventStoreCall, Rule: "api", Call: "reserve", Wait: 300 * time.Microsecond})
	c.Observe(throttle.Event{Kind: throttle.EventStoreCall, Rule: "api", Call: "reserve", Wait: 50 * time.Millisecond, Err: errors.New("timeout")})
	// Each result's one sample, in its bucket: ok at 300 µs, error at 50 ms.
	wantCalls := map[string]struct{ sum, below, at float64 }{"ok": {0.0003, 0.00025, 0.0005}, "error": {0.05, 0.025, 0.05}}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "throttle_store_call_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var call, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "call":
					call = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			w, ok := wantCalls[result]
			h := m.GetHistogram()
			if !ok || call != "reserve" || h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-w.sum) > 1e-9 {
				t.Errorf("store calls {call=%q,result=%q}: count %d sum %v, want reserve, 1, %v", call, result, h.GetSampleCount(), h.GetSampleSum(), w.sum)
				continue
			}
			for _, b := range h.GetBucket() {
				if (b.GetUpperBound() == w.below && b.GetCumulativeCount() != 0) || (b.GetUpperBound() == w.at && b.GetCumulativeCount() != 1) {
					t.Errorf("store calls %s: bucket le=%v holds %d", result, b.GetUpperBound(), b.GetCumulativeCount())
				}
			}
			delete(wantCalls, result)
		}
	}
	if len(wantCalls) != 0 {
		t.Errorf("store calls missing: %v", wantCalls)
	}
	c2 := promthrottle.New()
	c2.Observe(throttle.Event{Kind: throttle.EventRetry, Rule: "api"})
	if v := testutil.ToFloat64(c2); v != 1 {
		t.Errorf("a collector of one retry: %v, want 1", v)
	}
}
