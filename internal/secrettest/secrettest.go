// Package secrettest is the scenario of the no-secret tests: requests
// carrying an API key in their Authorization header (the rules' partition
// key), their query string and their path, sent through a local Transport
// so that it makes every event kind (acquired, queued, dequeued, rejected,
// rate limited, paused, capped, retry, leases). The root's test checks the
// events and the log lines it gives; otelthrottle's and promthrottle's, in
// their own modules, the attributes and labels their observers make of the
// same events. Test-only: it imports testing.
package secrettest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

// Secret is the API key the scenario's requests carry.
const Secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"

// Rules are the names of the scenario's two rules, both keyed by the
// Authorization header: a rate of 1/s, burst 1, and a concurrency cap of 1.
var Rules = []string{"per-key", "inflight"}

// Host is the host of the scenario's requests.
const Host = "api.example"

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Run sends the scenario's requests through a Transport on a fake clock,
// with opts (the observers under test) added to its own, and fails t if a
// request that should succeed does not. It returns when every request is
// done; the observers have then seen every event.
func Run(t testing.TB, opts ...throttle.Option) {
	t.Helper()
	clk := fakeclock.New(time.Unix(1_700_000_000, 0))
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
	tr, err := throttle.New(base, append([]throttle.Option{
		throttle.WithClock(clk), throttle.WithHeadroom(0), throttle.WithMaxQueue(1),
		throttle.WithRules(
			throttle.Rule{Name: Rules[0], Key: key, Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}},
			throttle.Rule{Name: Rules[1], Key: key, Concurrency: 1}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	send := func() error {
		r, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+Host+"/v1/"+Secret+"?api_key="+Secret, nil)
		if err != nil {
			return err
		}
		r.Header.Set("Authorization", "Bearer "+Secret)
		resp, err := tr.RoundTrip(r)
		if resp != nil {
			_ = resp.Body.Close()
		}
		return err
	}
	// 429 + Retry-After: rate limited, paused, retry (after 1 s), acquired.
	done := make(chan error, 2)
	go func() { done <- send() }()
	clk.WaitTimers(1)
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A waiter (queued), and one more: the queue is full (rejected).
	go func() { done <- send() }()
	clk.WaitTimers(1)
	if err := send(); err == nil {
		t.Fatal("a request found room in a full queue")
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Check fails t if text, what an observer made of the scenario (named
// what), holds the key, the Authorization scheme, the query, the path or a
// bucket key (a rule's name followed by ':' and the key's hash).
func Check(t testing.TB, what, text string) {
	t.Helper()
	for _, bad := range []string{Secret, "Bearer", "api_key", "/v1", Rules[0] + ":", Rules[1] + ":"} {
		if strings.Contains(text, bad) {
			t.Errorf("%s holds %q (the key, the query, the path or a bucket key):\n%s", what, bad, text)
		}
	}
}
