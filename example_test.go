package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
)

// newServer returns a test server answering 200 "ok" to every request.
func newServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, "ok")
	}))
}

// get sends a GET with the given API key and describes the outcome.
func get(client *http.Client, url, apiKey string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	if apiKey != "" {
		req.Header.Set("X-Api-Key", apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		var we *throttle.WaitError
		if errors.As(err, &we) {
			return fmt.Sprintf("rejected by rule %q: %v", we.Rule, we.Err)
		}
		return err.Error()
	}
	_ = resp.Body.Close()
	return resp.Status
}

func ExampleNewTransport() {
	srv := newServer()
	defer srv.Close()

	// At most 100 requests a second, 10 at once; excess requests wait for
	// their slot instead of failing.
	client := &http.Client{Transport: throttle.NewTransport(http.DefaultTransport,
		throttle.WithRules(throttle.Rule{
			Name:  "stripe-global",
			Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10},
		}),
	)}
	for range 3 {
		fmt.Println(get(client, srv.URL, ""))
	}
	// Output:
	// 200 OK
	// 200 OK
	// 200 OK
}

func ExampleRule_partition() {
	srv := newServer()
	defer srv.Close()

	// One request per minute per API key. The keys are hashed: they never
	// appear raw in memory or in Redis. WithoutWaiting rejects instead of
	// waiting, to show which requests would have had to wait.
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{
			Name:  "per-api-key",
			Limit: throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1},
			Key:   throttle.KeyHeader("X-Api-Key"),
		}),
	)}
	fmt.Println("key A:", get(client, srv.URL, "sk_test_A"))
	fmt.Println("key B:", get(client, srv.URL, "sk_test_B"))
	fmt.Println("key A:", get(client, srv.URL, "sk_test_A"))
	// Output:
	// key A: 200 OK
	// key B: 200 OK
	// key A: rejected by rule "per-api-key": throttle: slot lies beyond the maximum wait
}

func ExampleNew_invalidRule() {
	_, err := throttle.New(nil, throttle.WithRules(throttle.Rule{
		Name:  "twilio",
		Limit: throttle.Limit{Rate: 1, Period: time.Second}, // no Burst
	}))
	var re *throttle.RuleError
	if errors.As(err, &re) {
		fmt.Println("rule:", re.Rule, "field:", re.Field)
	}
	fmt.Println(err)
	// Output:
	// rule: twilio field: Limit.Burst
	// throttle: rule "twilio": Limit.Burst: must be >= 1, got 0
}

func ExampleWaitError() {
	srv := newServer()
	defer srv.Close()

	// One request an hour; WithHeadroom(0) runs the rule at exactly that.
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithHeadroom(0),
		throttle.WithRules(throttle.Rule{
			Name:  "hourly",
			Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1},
		}),
	)}
	fmt.Println(get(client, srv.URL, ""))

	// The next slot is an hour away, beyond this request's deadline: it
	// fails at once, without sleeping and without taking the slot.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := client.Do(req)
	var we *throttle.WaitError
	if errors.As(err, &we) {
		fmt.Println("rule:", we.Rule)
		fmt.Println("would wait about:", we.Wait.Round(time.Minute))
		fmt.Println("beyond deadline:", errors.Is(err, throttle.ErrBeyondDeadline))
		fmt.Println("deadline exceeded:", errors.Is(err, context.DeadlineExceeded))
	}
	// Output:
	// 200 OK
	// rule: hourly
	// would wait about: 1h0m0s
	// beyond deadline: true
	// deadline exceeded: true
}

func ExampleRetryPolicy() {
	// The server refuses the first request of each path for rate, asking
	// to come back at once, and serves the next.
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		again := seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if !again {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	// By default a POST is retried only with an Idempotency-Key; this API
	// makes its /search endpoint safe to repeat.
	client := &http.Client{Transport: throttle.NewTransport(nil,
		throttle.WithRetry(throttle.RetryPolicy{
			MaxAttempts: 2,
			Replayable: func(r *http.Request) bool {
				return r.Method == http.MethodGet || r.URL.Path == "/search"
			},
		}),
	)}
	for _, path := range []string{"/search", "/charges"} {
		resp, err := client.Post(srv.URL+path, "text/plain", strings.NewReader("q"))
		if err != nil {
			fmt.Println(err)
			continue
		}
		_ = resp.Body.Close()
		fmt.Println(path, resp.Status)
	}
	// Output:
	// /search 200 OK
	// /charges 429 Too Many Requests
}

func ExampleTransport_zero() {
	srv := newServer()
	defer srv.Close()

	// The zero Transport has no rules: it passes every request to
	// http.DefaultTransport as it is.
	client := &http.Client{Transport: &throttle.Transport{}}
	fmt.Println(get(client, srv.URL, ""))
	// Output:
	// 200 OK
}
