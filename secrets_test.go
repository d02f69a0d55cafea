package throttle_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/otelthrottle"
	"github.com/throttlekit/throttle/promthrottle"
)

// TestNoSecretsObserved sends requests carrying an API key in their
// Authorization header (the rules' partition key), their query string and
// their path through every event kind a local Transport makes (acquired,
// queued, rejected, rate limited, paused, capped, retry, leases), and checks
// that no event, log line, OpenTelemetry attribute or Prometheus label holds
// the key, nor the rules' bucket keys.
func TestNoSecretsObserved(t *testing.T) {
	const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	rec := &recorder{}
	logs := &syncBuffer{}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	otelObs, err := otelthrottle.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	prom := promthrottle.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom)

	clk := fakeclock.New(epoch)
	var mu sync.Mutex
	n := 0
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		h := http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"10"}}
		if i == 1 {
			h.Set("Retry-After", "1")
			return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody, Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	key := throttle.KeyHeader("Authorization")
	tr := mustNew(t, base, throttle.WithClock(clk), throttle.WithHeadroom(0), throttle.WithMaxQueue(1),
		throttle.WithObserver(rec), throttle.WithObserver(otelObs), throttle.WithObserver(prom),
		throttle.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		throttle.WithRules(
			throttle.Rule{Name: "per-key", Key: key, Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}},
			throttle.Rule{Name: "inflight", Key: key, Concurrency: 1}))
	req := func() *http.Request {
		r := newReq(t, context.Background(), "GET", "http://api.example/v1/"+secret+"?api_key="+secret, "Authorization", "Bearer "+secret)
		return r
	}
	// 429 + Retry-After: rate limited, paused, retry (after 1 s), acquired.
	done := make(chan error, 2)
	go func() { done <- roundTrip(tr, req()) }()
	clk.WaitTimers(1)
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A waiter (queued), and one more: the queue is full (rejected).
	go func() { done <- roundTrip(tr, req()) }()
	clk.WaitTimers(1)
	if err := roundTrip(tr, req()); err == nil {
		t.Fatal("a request found room in a full queue")
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var texts []string
	kinds := map[throttle.EventKind]bool{}
	for _, e := range rec.take() {
		kinds[e.Kind] = true
		texts = append(texts, fmt.Sprintf("%+v", e))
		if e.Rule != "per-key" && e.Rule != "inflight" {
			t.Errorf("%v: rule %q is not a rule's name", e.Kind, e.Rule)
		}
		if e.Host != "api.example" {
			t.Errorf("%v: host %q", e.Kind, e.Host)
		}
	}
	for _, k := range []throttle.EventKind{throttle.EventAcquired, throttle.EventQueued, throttle.EventDequeued, throttle.EventRejected,
		throttle.EventRateLimited, throttle.EventPaused, throttle.EventCapped, throttle.EventRetry, throttle.EventLeaseAcquired, throttle.EventLeaseReleased} {
		if !kinds[k] {
			t.Errorf("no %v event: the test does not cover it", k)
		}
	}
	texts = append(texts, logs.String())
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	texts = append(texts, fmt.Sprintf("%+v", rm))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&sb, mf); err != nil {
			t.Fatal(err)
		}
	}
	texts = append(texts, sb.String())
	for i, s := range texts {
		if strings.Contains(s, secret) || strings.Contains(s, "Bearer") || strings.Contains(s, "api_key") || strings.Contains(s, "/v1") || strings.Contains(s, "per-key:") {
			t.Errorf("text %d holds the key, the query, the path or a bucket key:\n%s", i, s)
		}
	}
	if !strings.Contains(sb.String(), `rule="per-key"`) || !strings.Contains(logs.String(), `"rule":"per-key"`) {
		t.Errorf("the rule's name is missing from the labels or the logs")
	}
}
