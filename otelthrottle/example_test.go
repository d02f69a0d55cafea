package otelthrottle_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/otelthrottle"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	obs, err := otelthrottle.New(mp)
	if err != nil {
		panic(err)
	}
	tr := throttle.NewTransport(nil, throttle.WithObserver(obs),
		throttle.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}}))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			panic(err)
		}
		_ = resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "throttle.rate_limiting.requests" {
			for _, p := range s.DataPoints {
				rule, _ := p.Attributes.Value(otelthrottle.RuleKey)
				result, _ := p.Attributes.Value(otelthrottle.ResultKey)
				fmt.Printf("%s %s=%s %s=%s: %d\n", m.Name, otelthrottle.RuleKey, rule.AsString(), otelthrottle.ResultKey, result.AsString(), p.Value)
			}
		}
	}
	// Output:
	// throttle.rate_limiting.requests throttle.rule=api throttle.rate_limiting.result=acquired: 3
}
