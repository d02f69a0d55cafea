package throttle_test

import (
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
)

// inFlightServer answers after service, rejecting with 429 a request that
// arrives while limit others are in service; it records the most in
// service at once.
type inFlightServer struct {
	limit    int
	service  time.Duration
	now, top atomic.Int64
	rejected atomic.Int64
	served   atomic.Int64
}

func (s *inFlightServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n := s.now.Add(1)
	if int(n) > s.limit {
		s.now.Add(-1)
		s.rejected.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	for top := s.top.Load(); n > top && !s.top.CompareAndSwap(top, n); top = s.top.Load() {
	}
	time.Sleep(s.service)
	// Out of service before the answer leaves, so that a client that read
	// it is never still counted.
	s.now.Add(-1)
	s.served.Add(1)
	_, _ = io.WriteString(w, "ok\n")
}

func TestConcurrencyCapsRequestsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int
		goroutines int
		rule       throttle.Rule
	}{
		{"cap alone", 3, 16, throttle.Rule{Name: "c", Concurrency: 3}},
		{"cap of one", 1, 8, throttle.Rule{Name: "c", Concurrency: 1}},
		{"cap and rate", 4, 16, throttle.Rule{Name: "c", Concurrency: 4, Limit: throttle.Limit{Rate: 1000, Period: time.Second, Burst: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &inFlightServer{limit: tc.limit, service: 5 * time.Millisecond}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			tr := mustNew(t, nil, throttle.WithRules(tc.rule), throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}))
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			var wg sync.WaitGroup
			for range tc.goroutines {
				wg.Go(func() {
					for range 5 {
						resp, err := client.Get(hs.URL)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
				})
			}
			wg.Wait()
			if r := srv.rejected.Load(); r != 0 {
				t.Errorf("%d requests rejected for concurrency, want 0", r)
			}
			if top := srv.top.Load(); top > int64(tc.limit) || top < 1 {
				t.Errorf("at most %d in service, want 1..%d", top, tc.limit)
			}
			if got := srv.served.Load(); got != int64(5*tc.goroutines) {
				t.Errorf("served %d, want %d", got, 5*tc.goroutines)
			}
		})
	}
}

// TestLeaseHeldUntilBodyDone checks when a request gives its lease back:
// not when RoundTrip returns, but when its body is closed or read to its
// end, or when the base transport fails it.
func TestLeaseHeldUntilBodyDone(t *testing.T) {
	var fail atomic.Bool
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		if fail.Load() {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	tr := mustNew(t, base, throttle.WithRules(throttle.Rule{Name: "one", Concurrency: 1}))
	get := func(d time.Duration) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return tr.RoundTrip(newReq(t, ctx, "GET", "http://x/"))
	}
	// blocked reports whether a second request finds the lease taken.
	blocked := func(t *testing.T) bool {
		t.Helper()
		resp, err := get(20 * time.Millisecond)
		if err == nil {
			_ = resp.Body.Close()
			return false
		}
		var we *throttle.WaitError
		if !errors.As(err, &we) || we.Rule != "one" || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want a *WaitError of rule one that is a deadline", err)
		}
		return true
	}
	t.Run("until Close", func(t *testing.T) {
		resp, err := get(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !blocked(t) {
			t.Fatal("a second request got a lease while the first's body was open")
		}
		_ = resp.Body.Close()
		_ = resp.Body.Close() // twice gives back once
		if blocked(t) {
			t.Fatal("the lease was not given back on Close")
		}
	})
	t.Run("until EOF", func(t *testing.T) {
		resp, err := get(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			t.Fatalf("body %q", b)
		}
		if blocked(t) {
			t.Fatal("the lease was not given back at EOF")
		}
		_ = resp.Body.Close()
		if blocked(t) {
			t.Fatal("a Close after EOF took the lease again")
		}
	})
	t.Run("on a transport error", func(t *testing.T) {
		fail.Store(true)
		if _, err := get(time.Second); err == nil {
			t.Fatal("no error")
		}
		fail.Store(false)
		if blocked(t) {
			t.Fatal("the lease was not given back on the transport's error")
		}
	})
}

func TestConcurrencyRuleValidation(t *testing.T) {
	for _, tc := range []struct {
		rule  throttle.Rule
		field string
	}{
		{throttle.Rule{Name: "neg", Concurrency: -1}, "Concurrency"},
		{throttle.Rule{Name: "huge", Concurrency: 1 << 20}, "Concurrency"},
		{throttle.Rule{Name: "half a limit", Concurrency: 5, Limit: throttle.Limit{Rate: 5}}, "Limit.Period"},
		{throttle.Rule{Name: "neither"}, "Limit.Rate"},
		{throttle.Rule{Name: "cap with an algorithm", Concurrency: 3, Algorithm: throttle.FixedWindow}, "Algorithm"},
	} {
		_, err := throttle.New(nil, throttle.WithRules(tc.rule))
		var re *throttle.RuleError
		if !errors.As(err, &re) || re.Rule != tc.rule.Name || re.Field != tc.field {
			t.Errorf("rule %q: err %v, want a *RuleError on %s", tc.rule.Name, err, tc.field)
		}
	}
	if _, err := throttle.New(nil, throttle.WithRules(throttle.Rule{Name: "ok", Concurrency: 10})); err != nil {
		t.Errorf("a rule with a Concurrency alone: %v", err)
	}
}
