package promthrottle_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/promthrottle"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	metrics := promthrottle.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	tr := throttle.NewTransport(nil, throttle.WithObserver(metrics),
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
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP throttle_rate_limiting_requests_total Requests that asked for their slot, by result.
# TYPE throttle_rate_limiting_requests_total counter
throttle_rate_limiting_requests_total{reason="",result="acquired",rule="api"} 3
`), "throttle_rate_limiting_requests_total")
	fmt.Println("requests acquired: 3 —", err == nil)
	// Output:
	// requests acquired: 3 — true
}
