package otelthrottle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/observertest"
	"github.com/throttlekit/throttle/otelthrottle"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// api answers 429 with Retry-After: 2 to the first request, then 200 with a
// body, to every other.
func api() rtFunc {
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
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}
}

// collect returns the metrics of r by name.
func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelthrottle.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelthrottle.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sum returns the value of the data point of an Int64 sum or gauge with
// attributes kvs, and whether there is one.
func value(t *testing.T, ms map[string]metricdata.Metrics, name, unit string, kvs ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	if m.Unit != unit {
		t.Errorf("%s: unit %q, want %q", name, m.Unit, unit)
	}
	want := attribute.NewSet(kvs...)
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value, true
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Sum, true
			}
		}
	default:
		t.Fatalf("%s: data %T", name, m.Data)
	}
	return 0, false
}

func want(t *testing.T, ms map[string]metricdata.Metrics, name, unit string, v float64, kvs ...attribute.KeyValue) {
	t.Helper()
	got, ok := value(t, ms, name, unit, kvs...)
	if !ok {
		t.Errorf("%s%v: no data point; metrics %v", name, kvs, names(ms))
		return
	}
	if got != v {
		t.Errorf("%s%v = %v, want %v", name, kvs, got, v)
	}
}

func names(ms map[string]metricdata.Metrics) []string {
	var out []string
	for n := range ms {
		out = append(out, n)
	}
	return out
}

func newObserver(t *testing.T) (*otelthrottle.Observer, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	o, err := otelthrottle.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	return o, r
}

var (
	rule   = otelthrottle.RuleKey.String("api")
	leased = otelthrottle.RuleKey.String("inflight")
)

func TestObserverRecords(t *testing.T) {
	o, r := newObserver(t)
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	tr, err := throttle.New(api(), throttle.WithClock(clk), throttle.WithObserver(o), throttle.WithHeadroom(0),
		throttle.WithRules(
			throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}},
			throttle.Rule{Name: "inflight", Concurrency: 2}))
	if err != nil {
		t.Fatal(err)
	}
	// The first request meets a 429 naming 2 s: a pause, a retry after
	// it, in a fresh slot that the pause made wait.
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
	ms := collect(t, r)
	want(t, ms, "throttle.rate_limiting.active_request_leases", "{request}", 1, leased)
	clk.Advance(500 * time.Millisecond)
	_ = resp.Body.Close()

	// A request whose context is done: canceled. And one while the slot
	// is taken, of a Transport that does not wait: rejected.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.RoundTrip(newReq(t, ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	nowait, err := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}), throttle.WithClock(clk), throttle.WithObserver(o), throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if resp, err := nowait.RoundTrip(newReq(t, context.Background())); err == nil {
			_ = resp.Body.Close()
		}
	}

	ms = collect(t, r)
	want(t, ms, "throttle.rate_limiting.requests", "{request}", 3, rule, otelthrottle.ResultKey.String("acquired"))
	want(t, ms, "throttle.rate_limiting.requests", "{request}", 1, rule, otelthrottle.ResultKey.String("rejected"), otelthrottle.ReasonKey.String("beyond_max_wait"))
	want(t, ms, "throttle.rate_limiting.requests", "{request}", 1, rule, otelthrottle.ResultKey.String("canceled"), otelthrottle.ReasonKey.String("canceled"))
	want(t, ms, "throttle.server.rate_limited", "{response}", 1, rule, otelthrottle.StatusKey.Int(429))
	want(t, ms, "throttle.server.pauses", "{pause}", 1, rule)
	want(t, ms, "throttle.server.pause.duration", "s", 2, rule)
	want(t, ms, "throttle.retries", "{retry}", 1, rule)
	want(t, ms, "throttle.rate_limiting.active_request_leases", "{request}", 0, leased)
	want(t, ms, "throttle.rate_limiting.request_lease.duration", "s", 2.5, leased)
	want(t, ms, "throttle.fleet.cap.rate", "{unit}/s", 0, rule)
	if _, ok := ms["throttle.rate_limiting.request.time_in_queue"]; ok {
		// The retry slept the server's 2 s, then found its slot free.
		want(t, ms, "throttle.rate_limiting.request.time_in_queue", "s", 0, rule, otelthrottle.ResultKey.String("acquired"))
	}
}

// TestObserverDialect: a rate-limited response that a dialect recognised
// is counted under the dialect's name, beside those no dialect
// recognised, which have no throttle.dialect; the server's reason is not
// an attribute.
func TestObserverDialect(t *testing.T) {
	o, r := newObserver(t)
	observertest.RateLimitedByDialect(t, o)
	ms := collect(t, r)
	status := otelthrottle.StatusKey.Int(429)
	want(t, ms, "throttle.server.rate_limited", "{response}", 2, rule, status, otelthrottle.DialectKey.String("stripe"))
	want(t, ms, "throttle.server.rate_limited", "{response}", 1, rule, status)
	if s := fmt.Sprintf("%+v", ms["throttle.server.rate_limited"]); strings.Contains(s, "global-rate") {
		t.Errorf("the server's reason is an attribute: %s", s)
	}
}

func TestObserverQueue(t *testing.T) {
	o, r := newObserver(t)
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
	tr, err := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}), throttle.WithClock(clk), throttle.WithObserver(o), throttle.WithHeadroom(0),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.RoundTrip(newReq(t, context.Background())); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := tr.RoundTrip(newReq(t, context.Background())); err != nil {
			t.Error(err)
		}
	}()
	clk.WaitTimers(1)
	want(t, collect(t, r), "throttle.rate_limiting.queued_requests", "{request}", 1, rule)
	clk.Advance(time.Second)
	<-done
	ms := collect(t, r)
	want(t, ms, "throttle.rate_limiting.queued_requests", "{request}", 0, rule)
	want(t, ms, "throttle.rate_limiting.request.time_in_queue", "s", 1, rule, otelthrottle.ResultKey.String("acquired"))
	want(t, ms, "throttle.rate_limiting.requests", "{request}", 2, rule, otelthrottle.ResultKey.String("acquired"))
}

func TestObserverModeAndCap(t *testing.T) {
	o, r := newObserver(t)
	o.Observe(throttle.Event{Kind: throttle.EventModeChange, From: throttle.ModeShared, To: throttle.ModeFallback})
	o.Observe(throttle.Event{Kind: throttle.EventCapped, Rule: "api", CapRate: 0.5, Remaining: 30, HasRemaining: true})
	ms := collect(t, r)
	fb := otelthrottle.ModeKey.String("fallback")
	want(t, ms, "throttle.store.fallback.active", "1", 1, fb)
	want(t, ms, "throttle.store.mode_changes", "{change}", 1, fb)
	want(t, ms, "throttle.server.quota.remaining", "{unit}", 30, rule)
	want(t, ms, "throttle.fleet.cap.rate", "{unit}/s", 0.5, rule)
	// A reading beside the fleet's count: the server's 12 left, the
	// fleet's count leaving 42 (others spent 30).
	o.Observe(throttle.Event{Kind: throttle.EventQuota, Rule: "api", Limit: 100, Remaining: 12, HasRemaining: true, Window: time.Second, Estimate: 42})
	ms = collect(t, r)
	want(t, ms, "throttle.server.quota.remaining", "{unit}", 12, rule)
	want(t, ms, "throttle.fleet.quota.remaining", "{unit}", 42, rule)
	o.Observe(throttle.Event{Kind: throttle.EventModeChange, From: throttle.ModeFallback, To: throttle.ModeShared})
	ms = collect(t, r)
	want(t, ms, "throttle.store.fallback.active", "1", 0, fb)
	want(t, ms, "throttle.store.fallback.active", "1", 0, otelthrottle.ModeKey.String("shared"))
}

// TestObserverStoreCalls: the Redis calls' durations, by call, failures
// apart under error.type.
func TestObserverStoreCalls(t *testing.T) {
	o, r := newObserver(t)
	o.Observe(throttle.Event{Kind: throttle.EventStoreCall, Rule: "api", Call: "reserve", Wait: 300 * time.Microsecond})
	o.Observe(throttle.Event{Kind: throttle.EventStoreCall, Rule: "api", Call: "reserve", Wait: 200 * time.Microsecond})
	o.Observe(throttle.Event{Kind: throttle.EventStoreCall, Rule: "api", Call: "reserve", Wait: 50 * time.Millisecond, Err: errors.New("timeout")})
	ms := collect(t, r)
	reserve := otelthrottle.CallKey.String("reserve")
	want(t, ms, "throttle.store.call.duration", "s", 0.0005, reserve)
	want(t, ms, "throttle.store.call.duration", "s", 0.05, reserve, otelthrottle.ReasonKey.String("error"))
}

func TestNewNil(t *testing.T) {
	if _, err := otelthrottle.New(nil); err == nil {
		t.Fatal("New(nil) made an Observer")
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
