// Package secrettest is the scenario of the no-secret tests: requests
// carrying an API key in their Authorization header (the rules' partition
// key), their query string and their path, sent through Transports so that
// they make every event kind. [Run] drives a local Transport on a fake
// clock (acquired, queued, dequeued, rejected, rate limited, paused,
// capped, retry, leases, quota); [RunRedis] one sharing its buckets in a
// private redis-server, for what only Redis makes (store calls, a lease
// lost, mode changes). The root's test checks the events and the log
// lines they give, and that every kind was made ([CheckKinds]);
// otelthrottle's and promthrottle's, in their own modules, the attributes
// and labels their observers make of the same events. Test-only: it
// imports testing.
package secrettest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/redistest"
)

// Secret is the API key the scenario's requests carry.
const Secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"

// Rules are the names of the scenario's rules, all keyed by the
// Authorization header: per-key, a rate of 1/s with a burst of 1 (100/s in
// RunRedis); inflight, a concurrency cap of 1 (2 in RunRedis); metered,
// 100/s, whose answers report the server's quota (Run).
var Rules = []string{"per-key", "inflight", "metered"}

// Host is the host of the scenario's requests.
const Host = "api.example"

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// quotaHeader is the header of the scenario's answers: a quota of 100
// with remaining left.
func quotaHeader(remaining int) http.Header {
	return http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {fmt.Sprint(remaining)}}
}

// newTransport returns a Transport over base with the scenario's options
// and then opts (the observers under test), closed by t.Cleanup.
func newTransport(t testing.TB, base http.RoundTripper, own, opts []throttle.Option) *throttle.Transport {
	t.Helper()
	tr, err := throttle.New(base, append(own, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// request returns a request of the scenario, carrying the key in its
// Authorization header, its path and its query.
func request() (*http.Request, error) {
	r, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+Host+"/v1/"+Secret+"?api_key="+Secret, nil)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+Secret)
	return r, nil
}

// send sends a request of the scenario through tr and closes the
// response's body.
func send(tr http.RoundTripper) error {
	r, err := request()
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(r)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// Run sends the scenario's requests through local Transports on a fake
// clock, with opts (the observers under test) added to their own, and
// fails t if a request that should succeed does not. It returns when every
// request is done; the observers have then seen every event.
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
		h := quotaHeader(10)
		if i == 1 {
			h.Set("Retry-After", "1")
			return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody, Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
	})
	key := throttle.KeyHeader("Authorization")
	tr := newTransport(t, base, []throttle.Option{
		throttle.WithClock(clk), throttle.WithHeadroom(0), throttle.WithMaxQueue(1),
		throttle.WithRules(
			throttle.Rule{Name: Rules[0], Key: key, Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}},
			throttle.Rule{Name: Rules[1], Key: key, Concurrency: 1}),
	}, opts)
	// 429 + Retry-After: rate limited, paused, retry (after 1 s), acquired.
	done := make(chan error, 2)
	go func() { done <- send(tr) }()
	clk.WaitTimers(1)
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A waiter (queued), and one more: the queue is full (rejected).
	go func() { done <- send(tr) }()
	clk.WaitTimers(1)
	if err := send(tr); err == nil {
		t.Fatal("a request found room in a full queue")
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runQuota(t, clk, key, opts)
}

// runQuota sends 25 requests a second for two seconds through a Transport
// of the rule metered (100/s), each answered with what a server of 100 a
// second leaves: once the fleet's count of the bucket covers a whole
// window (a second, the rule's period), every answer is a reading of the
// quota beside that count (quota events). The fleet spends a quarter of
// the quota, so that no request waits.
func runQuota(t testing.TB, clk *fakeclock.Clock, key func(*http.Request) string, opts []throttle.Option) {
	t.Helper()
	var mu sync.Mutex
	var sent []time.Time
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		now := clk.Now()
		sent = append(sent, now)
		inWindow := 0
		for _, at := range sent {
			if at.After(now.Add(-time.Second)) {
				inWindow++
			}
		}
		mu.Unlock()
		return &http.Response{StatusCode: 200, Header: quotaHeader(max(100-inWindow, 0)), Body: http.NoBody, Request: r}, nil
	})
	tr := newTransport(t, base, []throttle.Option{
		throttle.WithClock(clk), throttle.WithoutWaiting(),
		throttle.WithRules(throttle.Rule{Name: Rules[2], Key: key, Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 1}}),
	}, opts)
	for range 50 {
		if err := send(tr); err != nil {
			t.Fatal(err)
		}
		clk.Advance(40 * time.Millisecond)
	}
}

// redisWait bounds RunRedis's wait for each event it needs: generous,
// since a loaded machine may be slow to restart a redis-server.
const redisWait = 30 * time.Second

// RunRedis sends the scenario's requests through a Transport sharing its
// buckets in a private redis-server (internal/redistest; never the
// system's), on the real clock, with opts added to its own as in Run: a
// lease held while Redis restarts and forgets it (lost), then Redis killed
// (a failed call, the fall to the outage mode) and restarted (the return
// to the shared buckets). Every request makes calls to Redis (store
// calls). It fails t if an event does not come within 30 s of its cause.
func RunRedis(t testing.TB, opts ...throttle.Option) {
	t.Helper()
	srv := redistest.Start(t)
	w := &watch{}
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: quotaHeader(10), Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	key := throttle.KeyHeader("Authorization")
	tr := newTransport(t, base, []throttle.Option{
		throttle.WithRedis(srv.Client(t)), throttle.WithNamespace("secrettest"),
		throttle.WithRedisTimeout(time.Second), throttle.WithLeaseTTL(300 * time.Millisecond),
		throttle.WithObserver(w),
		throttle.WithRules(
			throttle.Rule{Name: Rules[0], Key: key, Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}},
			throttle.Rule{Name: Rules[1], Key: key, Concurrency: 2}),
	}, opts)
	r, err := request()
	if err != nil {
		t.Fatal(err)
	}
	held, err := tr.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	lost := func(e throttle.Event) bool { return e.Kind == throttle.EventLeaseLost }
	w.wait(t, "a lease lost", func() bool { return w.count(lost) > 0 }, nil)
	_ = held.Body.Close()

	sendOne := func() {
		if err := send(tr); err != nil {
			t.Errorf("a request while Redis is down or back: %v", err)
		}
	}
	fall := func(e throttle.Event) bool {
		return e.Kind == throttle.EventModeChange && e.To == throttle.ModeFallback
	}
	back := func(e throttle.Event) bool {
		return e.Kind == throttle.EventModeChange && e.To == throttle.ModeShared
	}
	falls := w.count(fall)
	srv.Kill()
	w.wait(t, "the fall to the outage mode", func() bool { return w.count(fall) > falls }, sendOne)
	returns := w.count(back)
	srv.Restart()
	w.wait(t, "the return to the shared buckets", func() bool { return w.count(back) > returns }, sendOne)
}

// watch counts the events of RunRedis's Transport, so that it can wait
// for the ones it causes. It is safe for concurrent use.
type watch struct {
	mu     sync.Mutex
	events []throttle.Event
}

func (w *watch) Observe(e throttle.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

// count returns how many of the events seen so far match.
func (w *watch) count(match func(throttle.Event) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.events {
		if match(e) {
			n++
		}
	}
	return n
}

// wait polls done every 50 ms, calling step (if not nil) before each poll,
// and fails t if done is still false after redisWait.
func (w *watch) wait(t testing.TB, what string, done func() bool, step func()) {
	t.Helper()
	deadline := time.Now().Add(redisWait)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("secrettest: no %s within %v", what, redisWait)
		}
		if step != nil {
			step()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunAll runs Run and RunRedis with opts, and fails t unless the two made
// every event kind between them (CheckKinds): the exporters' no-secret
// tests, which check what their observers recorded, not the events.
func RunAll(t testing.TB, opts ...throttle.Option) {
	t.Helper()
	k := &kinds{seen: map[throttle.EventKind]bool{}}
	opts = append(opts[:len(opts):len(opts)], throttle.WithObserver(k))
	Run(t, opts...)
	RunRedis(t, opts...)
	k.mu.Lock()
	defer k.mu.Unlock()
	CheckKinds(t, k.seen)
}

// kinds records the kinds of the events it observes.
type kinds struct {
	mu   sync.Mutex
	seen map[throttle.EventKind]bool
}

func (k *kinds) Observe(e throttle.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen[e.Kind] = true
}

// CheckKinds fails t for every event kind that seen does not hold: every
// kind from the first up to the last that has a name, so that a kind added
// later fails the no-secret tests until a scenario makes it.
func CheckKinds(t testing.TB, seen map[throttle.EventKind]bool) {
	t.Helper()
	for k := throttle.EventKind(1); k.String() != fmt.Sprintf("EventKind(%d)", int(k)); k++ {
		if !seen[k] {
			t.Errorf("no %v event: the no-secret scenarios do not cover it", k)
		}
	}
	if last := throttle.EventQuota; !seen[last] {
		t.Errorf("no %v event: the kinds' names end before it", last)
	}
}

// Check fails t if text, what an observer made of the scenario (named
// what), holds the key, the Authorization scheme, the query, the path or a
// bucket key (a rule's name followed by ':' and the key's hash).
func Check(t testing.TB, what, text string) {
	t.Helper()
	bad := []string{Secret, "Bearer", "api_key", "/v1"}
	for _, r := range Rules {
		bad = append(bad, r+":")
	}
	for _, b := range bad {
		if strings.Contains(text, b) {
			t.Errorf("%s holds %q (the key, the query, the path or a bucket key):\n%s", what, b, text)
		}
	}
}
