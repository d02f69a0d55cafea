package throttle_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
)

func ExampleAlgorithm() {
	srv := newServer()
	defer srv.Close()

	// GitHub's core API counts 5000 requests an hour in fixed windows that
	// reset on the hour: a FixedWindow rule counts the same way (its
	// Burst stays 0, a window's whole quota may go at once). Here 3 an
	// hour, without headroom, and no waiting for the next window.
	client := &http.Client{Transport: throttle.NewTransport(http.DefaultTransport,
		throttle.WithRules(throttle.Rule{
			Name:      "github-core",
			Algorithm: throttle.FixedWindow,
			Limit:     throttle.Limit{Rate: 3, Period: time.Hour},
		}),
		throttle.WithHeadroom(0),
		throttle.WithMaxWait(0),
	)}
	for range 4 {
		fmt.Println(get(client, srv.URL, ""))
	}
	fmt.Println(throttle.FixedWindow)
	// Output:
	// 200 OK
	// 200 OK
	// 200 OK
	// rejected by rule "github-core": throttle: slot lies beyond the maximum wait
	// FixedWindow
}
