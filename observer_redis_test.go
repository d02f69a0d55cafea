package throttle

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
)

// TestObserverModeChange kills Redis under a Transport and restarts it,
// and checks that the observer and the logger hear of the fall to the
// fallback (with its cause) and of the return, and that WithOnModeChange
// still does.
func TestObserverModeChange(t *testing.T) {
	srv := redistest.Start(t)
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(api.Close)
	events := make(chan Event, 64)
	changes := make(chan ModeChange, 16)
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	tr := mustNew(t, http.DefaultTransport, WithRedis(srv.Client(t)), WithNamespace(testNamespace(t)),
		WithRules(Rule{Name: "api", Limit: Limit{Rate: 1000, Period: time.Second, Burst: 10}}),
		WithRedisTimeout(time.Second),
		WithObserver(ObserverFunc(func(e Event) {
			if e.Kind == EventModeChange {
				events <- e
			}
		})),
		WithLogger(logger),
		WithOnModeChange(func(c ModeChange) { changes <- c }))
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	get := func() {
		resp, err := client.Get(api.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	get()
	srv.Kill()
	get()
	wait := func(to Mode) Event {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e := <-events:
				if e.To == to {
					return e
				}
			case <-deadline:
				t.Fatalf("no mode change to %v", to)
			case <-time.After(50 * time.Millisecond):
				get()
			}
		}
	}
	down := wait(ModeFallback)
	if down.From != ModeShared || down.Err == nil || down.Method != "" || down.Rule != "" || down.At.IsZero() {
		t.Errorf("fall %+v; want from shared, with its cause and a time, no request", down)
	}
	srv.Restart()
	up := wait(ModeShared)
	if up.From != ModeFallback || up.Err != nil {
		t.Errorf("return %+v; want from fallback, no error", up)
	}
	for _, want := range []Mode{ModeFallback, ModeShared} {
		select {
		case c := <-changes:
			if c.To != want {
				t.Errorf("WithOnModeChange got a change to %v, want %v", c.To, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("WithOnModeChange did not hear of the change to %v", want)
		}
	}
	// The logger is the observer after the one that reported the
	// return: its line may come a moment later.
	fall := `"level":"WARN","msg":"throttle: mode changed","from":"shared","to":"fallback"`
	back := `"level":"INFO","msg":"throttle: mode changed","from":"fallback","to":"shared"`
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		out = logs.String()
		mu.Unlock()
		if strings.Contains(out, fall) && strings.Contains(out, back) {
			return
		}
	}
	t.Errorf("logs lack the fall (Warn) or the return (Info):\n%s", out)
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestObserverLeaseLost restarts Redis (which forgets every key) while a
// response holds its lease: the next renewal finds its token gone, and the
// observer hears of the loss, then of the release.
func TestObserverLeaseLost(t *testing.T) {
	srv := redistest.Start(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(api.Close)
	events := make(chan Event, 64)
	tr := mustNew(t, http.DefaultTransport, WithRedis(srv.Client(t)), WithNamespace(testNamespace(t)),
		WithRules(Rule{Name: "inflight", Concurrency: 2}), WithLeaseTTL(300*time.Millisecond), WithRedisTimeout(time.Second),
		WithObserver(ObserverFunc(func(e Event) {
			if e.Kind == EventLeaseAcquired || e.Kind == EventLeaseLost || e.Kind == EventLeaseReleased {
				events <- e
			}
		})))
	t.Cleanup(func() { _ = tr.Close() })
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	next := func() Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no lease event")
		}
		return Event{}
	}
	if e := next(); e.Kind != EventLeaseAcquired || e.Rule != "inflight" || e.Method != "GET" {
		t.Fatalf("first event %+v, want the lease acquired", e)
	}
	srv.Restart()
	if e := next(); e.Kind != EventLeaseLost || e.Rule != "inflight" || e.Wait <= 0 {
		t.Fatalf("event %+v, want the lease lost after it was held a while", e)
	}
	_ = resp.Body.Close()
	if e := next(); e.Kind != EventLeaseReleased {
		t.Fatalf("event %+v, want the lease released", e)
	}
}

// TestObserverStoreCalls: every call to Redis is an EventStoreCall naming
// the call, its rule, the request and how long it took; a call that failed
// (Redis killed) carries its error, and the logger warns of it. Without
// Redis there is none.
func TestObserverStoreCalls(t *testing.T) {
	srv := redistest.Start(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(api.Close)
	var mu sync.Mutex
	var calls []Event
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	observe := ObserverFunc(func(e Event) {
		if e.Kind == EventStoreCall {
			mu.Lock()
			calls = append(calls, e)
			mu.Unlock()
		}
	})
	rule := Rule{Name: "api", Limit: Limit{Rate: 1000, Period: time.Second, Burst: 10}}
	tr := mustNew(t, http.DefaultTransport, WithRedis(srv.Client(t)), WithNamespace(testNamespace(t)),
		WithRules(rule), WithRedisTimeout(time.Second), WithRetry(RetryPolicy{MaxAttempts: 1}),
		WithObserver(observe), WithLogger(logger))
	t.Cleanup(tr.CloseIdleConnections)
	req := newReq(t, redisCtx(t), http.MethodPost, api.URL)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	mu.Lock()
	byCall := map[string]Event{}
	for _, e := range calls {
		byCall[e.Call] = e
	}
	mu.Unlock()
	host := strings.TrimPrefix(api.URL, "http://")
	for _, call := range []string{"reserve", "pause"} { // the 429 paused the bucket
		e, ok := byCall[call]
		switch {
		case !ok:
			t.Errorf("no EventStoreCall %q among %v", call, byCall)
		case e.Err != nil || e.Rule != "api" || e.Method != http.MethodPost || e.Host != host || e.Wait <= 0 || e.At.IsZero():
			t.Errorf("%s: %+v; want no error, rule api, POST to %s, a duration and a time", call, e, host)
		}
	}

	srv.Kill()
	mu.Lock()
	calls = nil
	mu.Unlock()
	resp, err = tr.RoundTrip(newReq(t, redisCtx(t), http.MethodGet, api.URL))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 || calls[0].Call != "reserve" || calls[0].Err == nil {
		t.Errorf("with Redis killed: %+v; want a failed reserve first", calls)
	}
	if !strings.Contains(logs.String(), `"msg":"throttle: redis call"`) || !strings.Contains(logs.String(), `"call":"reserve"`) {
		t.Errorf("no warning of the failed call in the log:\n%s", logs.String())
	}

	local := mustNew(t, http.DefaultTransport, WithRules(rule), WithRetry(RetryPolicy{MaxAttempts: 1}), WithObserver(ObserverFunc(func(e Event) {
		if e.Kind == EventStoreCall {
			t.Errorf("a Transport without Redis reported %+v", e)
		}
	})))
	if err := roundTrip(local, newReq(t, redisCtx(t), http.MethodGet, api.URL)); err != nil {
		t.Fatal(err)
	}
}
