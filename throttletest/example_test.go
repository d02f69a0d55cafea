package throttletest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// A Transport with Stripe's test-mode preset against a simulated Stripe:
// the server's report shows every request admitted.
func ExampleNewServer() {
	srv, err := throttletest.NewServer(throttletest.Stripe(throttletest.StripeConfig{Test: true}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	p := providers.StripePreset(providers.StripeConfig{Test: true, Hosts: []string{"127.0.0.1"}})
	tr := throttle.NewTransport(nil, p.Options()...)
	defer func() { _ = tr.Close() }()
	client := &http.Client{Transport: tr}
	for range 30 { // more than a second's 25
		resp, err := client.Get(srv.URL + "/v1/customers")
		if err != nil {
			fmt.Println(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	rep := srv.Report()
	fmt.Println("admitted", rep.Admitted, "refused", rep.RefusedTotal())
	// Output: admitted 30 refused 0
}

// Without a throttle, a burst meets Stripe's 429s, each with its reason:
// in test mode the global rate and the endpoint's are both 25 a second,
// and the global one is checked first.
func ExampleStripe() {
	srv, err := throttletest.NewServer(throttletest.Stripe(throttletest.StripeConfig{Test: true}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	reasons := map[string]int{}
	for range 30 {
		resp, err := http.Get(srv.URL + "/v1/customers")
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			reasons[resp.Header.Get("Stripe-Rate-Limited-Reason")]++
		}
	}
	fmt.Println(reasons)
	// Output: map[global-rate:5]
}

// A FakeClock drives the server's windows: GitHub's hourly quota resets
// on the hour without the test waiting for it.
func ExampleFakeClock() {
	fc := throttletest.NewFakeClock(time.Date(2026, 12, 1, 10, 59, 0, 0, time.UTC))
	h, err := throttletest.NewHandler(throttletest.GitHub(throttletest.GitHubConfig{Hourly: 1}), throttletest.WithClock(fc))
	if err != nil {
		fmt.Println(err)
		return
	}
	ask := func() {
		r := httptest.NewRequest("GET", "/user", nil)
		r.Header.Set("Authorization", "token ghp_example")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, "remaining", w.Header().Get("X-Ratelimit-Remaining"), "reset", time.Unix(mustAtoi(w.Header().Get("X-Ratelimit-Reset")), 0).UTC().Format("15:04"))
	}
	ask()
	ask()
	fc.Advance(time.Minute)
	ask()
	// Output:
	// 200 remaining 0 reset 11:00
	// 403 remaining 0 reset 11:00
	// 200 remaining 0 reset 12:00
}

// A pause refuses everything, with a Retry-After, until it ends.
func ExampleHandler_Pause() {
	fc := throttletest.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	h, err := throttletest.NewHandler(throttletest.Shopify(throttletest.ShopifyConfig{}), throttletest.WithClock(fc))
	if err != nil {
		fmt.Println(err)
		return
	}
	get := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/admin/api/2024-10/shop.json", nil))
		fmt.Printf("%d %q\n", w.Code, w.Header().Get("Retry-After"))
	}
	h.Pause(3 * time.Second)
	get()
	fc.Advance(3 * time.Second)
	get()
	fmt.Println(h.Report().Refused)
	// Output:
	// 429 "3.0"
	// 200 ""
	// map[pause:1]
}

// An outside consumer spends the same quota as the client under test.
func ExampleWithOutsideConsumer() {
	fc := throttletest.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	p := throttletest.Profile{Name: "api", Rules: []throttle.Rule{{
		Name: "per-second", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 10, Period: time.Second},
	}}}
	h, err := throttletest.NewHandler(p, throttletest.WithClock(fc), throttletest.WithOutsideConsumer(8, nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	fc.Advance(time.Second + 999*time.Millisecond) // into the second window, after the outside's 8
	admitted := 0
	for range 5 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code == http.StatusOK {
			admitted++
		}
	}
	rep := h.Report()
	fmt.Println("ours", admitted, "outside", rep.Outside.Admitted)
	// Output: ours 2 outside 15
}
