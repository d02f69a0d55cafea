package throttle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle"
)

func ExampleRule_concurrency() {
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	// At most 2 requests in flight at once (with WithRedis: across the
	// whole fleet). A request holds its lease until its body is closed.
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithRules(throttle.Rule{Name: "twilio-concurrency", Concurrency: 2}),
	)}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				fmt.Println(err)
				return
			}
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	fmt.Println("most in flight at once:", most.Load())
	// Output: most in flight at once: 2
}

func ExampleWithPriority() {
	srv := newServer()
	defer srv.Close()
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithRules(throttle.Rule{Name: "api", Concurrency: 1}),
	)}
	// A request a user waits for goes ahead of background work waiting
	// for the same cap.
	ctx := throttle.WithPriority(context.Background(), throttle.PriorityHigh)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	fmt.Println(resp.Status, throttle.PriorityOf(ctx))
	// Output: 200 OK high
}

func ExampleRule_actualCost() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Query-Cost", "12") // what the query really cost
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithRules(throttle.Rule{
			Name:  "graphql-points",
			Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 100},
			// Booked at the worst case...
			Cost: func(*http.Request) int { return 50 },
			// ...and corrected from the answer: the unused points go back
			// to the bucket when nothing is booked ahead of them.
			ActualCost: func(resp *http.Response) (int, bool) {
				n, err := strconv.Atoi(resp.Header.Get("X-Query-Cost"))
				return n, err == nil
			},
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}
