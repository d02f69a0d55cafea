package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle"

	"github.com/throttlekit/throttle/header"
)

// scriptedServer answers each request with the next status in statuses
// (the last one repeats), with the given headers, and records the bodies.
type scriptedServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	times  []time.Time
}

func newScriptedServer(t *testing.T, statuses []int, header http.Header) *scriptedServer {
	t.Helper()
	s := &scriptedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, string(b))
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
		status := statuses[min(n, len(statuses)-1)]
		if status != http.StatusOK {
			for k, v := range header {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "attempt body")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// retryTransport is a Transport with one rule of 1000/s, burst 10, and opts.
func retryTransport(t *testing.T, base http.RoundTripper, opts ...throttle.Option) *throttle.Transport {
	t.Helper()
	opts = append([]throttle.Option{throttle.WithRules(throttle.Rule{Name: "r", Limit: throttle.Limit{Rate: 1000, Period: time.Second, Burst: 10}})}, opts...)
	tr, err := throttle.New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestRetryReplayable(t *testing.T) {
	tooMany := http.Header{"Retry-After-Ms": {"10"}}
	tests := []struct {
		name      string
		method    string
		body      string
		idemKey   string
		noGetBody bool
		// always is a RetryPolicy.Replayable that says yes to everything.
		always   bool
		wantSent int
	}{
		{name: "GET is retried until it succeeds", method: http.MethodGet, wantSent: 2},
		{name: "POST without Idempotency-Key is never sent twice", method: http.MethodPost, body: "amount=1", wantSent: 1},
		{name: "POST with Idempotency-Key is retried with its body rewound", method: http.MethodPost, body: "amount=1", idemKey: "k1", wantSent: 2},
		{name: "PUT is idempotent", method: http.MethodPut, body: "x", wantSent: 2},
		{name: "a body without GetBody cannot be replayed", method: http.MethodPut, body: "x", noGetBody: true, wantSent: 1},
		{name: "nor by a Replayable that says yes", method: http.MethodPost, body: "x", noGetBody: true, always: true, wantSent: 1},
		{name: "a Replayable that says yes retries a POST", method: http.MethodPost, body: "x", always: true, wantSent: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptedServer(t, []int{429, 200}, tooMany)
			var opts []throttle.Option
			if tt.always {
				opts = append(opts, throttle.WithRetry(throttle.RetryPolicy{Replayable: func(*http.Request) bool { return true }}))
			}
			tr := retryTransport(t, nil, opts...)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, _ := http.NewRequest(tt.method, srv.URL, body)
			if tt.noGetBody {
				req.Body = io.NopCloser(strings.NewReader(tt.body))
				req.GetBody = nil
			}
			if tt.idemKey != "" {
				req.Header.Set("Idempotency-Key", tt.idemKey)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			drainAndClose(resp)
			got := srv.requests()
			if len(got) != tt.wantSent {
				t.Fatalf("sent %d times, want %d", len(got), tt.wantSent)
			}
			for i, b := range got {
				if b != tt.body {
					t.Errorf("attempt %d sent body %q, want %q", i, b, tt.body)
				}
			}
			wantStatus := 200
			if tt.wantSent == 1 {
				wantStatus = 429
			}
			if resp.StatusCode != wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, wantStatus)
			}
		})
	}
}

// trackingBase wraps a RoundTripper and records every response body it
// hands out, so a test can check that each one was closed.
type trackingBase struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	closed atomic.Bool
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

func (tb *trackingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := tb.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	b := &trackedBody{ReadCloser: resp.Body}
	resp.Body = b
	tb.mu.Lock()
	tb.bodies = append(tb.bodies, b)
	tb.mu.Unlock()
	return resp, nil
}

func TestRetryClosesRetriedBodiesAndReturnsLastResponse(t *testing.T) {
	srv := newScriptedServer(t, []int{429}, http.Header{"Retry-After-Ms": {"5"}})
	base := &trackingBase{base: http.DefaultTransport}
	tr := retryTransport(t, base, throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 4}))
	defer tr.CloseIdleConnections()

	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(context.Background()))
	if err != nil {
		t.Fatalf("retries ran out: want the last response and a nil error, got %v", err)
	}
	if resp.StatusCode != 429 {
		t.Fatalf("status %d, want the last 429", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "attempt body" {
		t.Fatalf("last body = %q, %v; want it readable and untouched", b, err)
	}
	_ = resp.Body.Close()
	if n := len(srv.requests()); n != 4 {
		t.Fatalf("sent %d times, want MaxAttempts = 4", n)
	}
	base.mu.Lock()
	defer base.mu.Unlock()
	for i, body := range base.bodies {
		if !body.closed.Load() {
			t.Errorf("body of attempt %d was not closed", i)
		}
	}
}

func TestRetryHonoursServerHints(t *testing.T) {
	t.Run("Stripe-Should-Retry false stops retries", func(t *testing.T) {
		srv := newScriptedServer(t, []int{429, 200}, http.Header{"Stripe-Should-Retry": {"false"}, "Retry-After-Ms": {"1"}})
		tr := retryTransport(t, nil, throttle.WithDialects(header.DialectFunc(func(_ int, h http.Header, _ time.Time, s *header.Signal) {
			if h.Get("Stripe-Should-Retry") == "false" {
				s.ShouldRetry = header.RetryHintDoNotRetry
			}
		})))
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		drainAndClose(resp)
		if n := len(srv.requests()); n != 1 {
			t.Fatalf("sent %d times, want 1", n)
		}
	})
	t.Run("a hostile Retry-After is capped, not slept", func(t *testing.T) {
		srv := newScriptedServer(t, []int{429, 200}, http.Header{"Retry-After": {"99999999999"}})
		tr := retryTransport(t, nil, throttle.WithMaxRetryAfter(20*time.Millisecond), throttle.WithHeadroom(0))
		start := time.Now()
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		drainAndClose(resp)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d, want the retry's 200", resp.StatusCode)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("took %v: the cap was not applied", d)
		}
	})
	t.Run("a retry delay beyond the deadline returns the 429 at once", func(t *testing.T) {
		srv := newScriptedServer(t, []int{429, 200}, http.Header{"Retry-After": {"30"}})
		tr := retryTransport(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		drainAndClose(resp)
		if resp.StatusCode != 429 || len(srv.requests()) != 1 {
			t.Fatalf("status %d after %d sends; want the first 429, sent once", resp.StatusCode, len(srv.requests()))
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("slept %v before giving up", d)
		}
	})
}

func TestRetryAfterPausesTheBucket(t *testing.T) {
	// One request meets a 429 with Retry-After: 1; another request of the
	// same bucket, sent just after, must not reach the server within that
	// second, although the bucket had room.
	var (
		mu    sync.Mutex
		times []time.Time
		first atomic.Bool
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if first.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			return
		}
	}))
	defer srv.Close()
	tr := retryTransport(t, nil, throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}))
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	drainAndClose(resp)
	resp, err = tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	drainAndClose(resp)
	mu.Lock()
	defer mu.Unlock()
	if gap := times[1].Sub(times[0]); gap < 950*time.Millisecond {
		t.Fatalf("second request arrived %v after the 429, want ≥ 1s", gap)
	}
}

func TestRetryDoesNotModifyCallerRequest(t *testing.T) {
	srv := newScriptedServer(t, []int{429, 200}, http.Header{"Retry-After-Ms": {"1"}})
	tr := retryTransport(t, nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte("payload")))
	req.Header.Set("Idempotency-Key", "abc")
	before := req.Header.Clone()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	drainAndClose(resp)
	if len(req.Header) != len(before) || req.Header.Get("Idempotency-Key") != "abc" {
		t.Fatalf("caller's headers changed: %v", req.Header)
	}
	if n := len(srv.requests()); n != 2 {
		t.Fatalf("sent %d, want 2", n)
	}
}

func TestRetryBaseErrorIsReturnedUntouched(t *testing.T) {
	want := errors.New("dial failed")
	tr := retryTransport(t, retryBaseFunc(func(*http.Request) (*http.Response, error) { return nil, want }))
	_, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://example.invalid/", nil))
	if err != want {
		t.Fatalf("err = %v, want the base's error itself", err)
	}
}

type retryBaseFunc func(*http.Request) (*http.Response, error)

func (f retryBaseFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
