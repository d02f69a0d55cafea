package otelthrottle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/secrettest"
	"github.com/throttlekit/throttle/otelthrottle"
)

// TestNoSecrets runs the root's no-secret scenarios (internal/secrettest:
// the local one and the one on a private Redis, between them every event
// kind) through the Observer and checks that no attribute of what it
// recorded holds the key, the query, the path or a bucket key, and that
// the rule's name is there.
func TestNoSecrets(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	obs, err := otelthrottle.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	secrettest.RunAll(t, throttle.WithObserver(obs))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("%+v", rm)
	secrettest.Check(t, "the OpenTelemetry data", text)
	if !strings.Contains(text, "per-key") {
		t.Errorf("the rule's name is missing from the attributes:\n%s", text)
	}
}
