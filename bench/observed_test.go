package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/otelthrottle"
	"github.com/throttlekit/throttle/promthrottle"
)

// BenchmarkRoundTripObserved measures what observing costs on the hot path
// of BenchmarkLocalTransport (local_test.go: one rule that never
// makes a request wait, a base returning a prepared response): "none" has
// no observer, "observer" a function doing nothing, "logger" a slog logger
// at Info (the acquired line is Debug, so it is not written), "otel" the
// otelthrottle Observer on the SDK's MeterProvider, "prom" the
// promthrottle Collector.
func BenchmarkRoundTripObserved(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: http.NoBody}
	base := rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	req := newReq(b, context.Background(), "GET", "http://api.example/v1", "X-Api-Key", "sk_bench")
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	otelObs, err := otelthrottle.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opt  throttle.Option
	}{
		{"none", nil},
		{"observer", throttle.WithObserver(throttle.ObserverFunc(func(throttle.Event) {}))},
		{"logger", throttle.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))},
		{"otel", throttle.WithObserver(otelObs)},
		{"prom", throttle.WithObserver(promthrottle.New())},
	} {
		tr := mustNew(b, base, tc.opt, throttle.WithRules(throttle.Rule{
			Name:  "bench",
			Limit: throttle.Limit{Rate: 1_000_000_000, Period: time.Second, Burst: 1_000_000},
		}))
		b.Run(tc.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tr.RoundTrip(req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
