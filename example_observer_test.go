package throttle_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/throttlekit/throttle"
)

// An Observer sees each decision: here the first request goes at once and
// the second is refused, as the Transport does not wait.
func ExampleWithObserver() {
	srv := newServer()
	defer srv.Close()
	obs := throttle.ObserverFunc(func(e throttle.Event) {
		switch e.Kind {
		case throttle.EventAcquired:
			fmt.Printf("%v %s rule=%s wait=%v\n", e.Kind, e.Method, e.Rule, e.Wait)
		case throttle.EventRejected:
			fmt.Printf("%v %s rule=%s reason=%v wait=%v\n", e.Kind, e.Method, e.Rule, e.Reason, e.Wait.Round(time.Minute))
		}
	})
	tr := throttle.NewTransport(nil, throttle.WithObserver(obs), throttle.WithoutWaiting(), throttle.WithHeadroom(0),
		throttle.WithRules(throttle.Rule{Name: "hourly", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}}))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		if resp, err := client.Get(srv.URL); err == nil {
			_ = resp.Body.Close()
		}
	}
	// Output:
	// acquired GET rule=hourly wait=0s
	// rejected GET rule=hourly reason=beyond_max_wait wait=1h0m0s
}

// WithLogger writes one line per event; at Info, a refused request is a
// Warn line, and the acquired slot's Debug line is not written.
func ExampleWithLogger() {
	srv := newServer()
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "host" || a.Key == "error" || a.Key == "wait" {
				return slog.Attr{} // vary from run to run
			}
			return a
		},
	}))
	tr := throttle.NewTransport(nil, throttle.WithLogger(logger), throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{Name: "hourly", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}}))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		if resp, err := client.Get(srv.URL); err == nil {
			_ = resp.Body.Close()
		}
	}
	// Output:
	// level=WARN msg="throttle: request rejected" method=GET rule=hourly reason=beyond_max_wait
}
