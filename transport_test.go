package throttle_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

func TestTransportMaxWait(t *testing.T) {
	tr, clk := fillBucket(t, okBase, throttle.WithMaxWait(500*time.Millisecond))
	body := newRecBody()
	req := newReq(t, context.Background(), "POST", "http://x/")
	req.Body = body
	err := roundTrip(tr, req)
	var we *throttle.WaitError
	if !errors.As(err, &we) || !errors.Is(err, throttle.ErrBeyondMaxWait) {
		t.Fatalf("err %v, want *WaitError wrapping ErrBeyondMaxWait", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, throttle.ErrBeyondDeadline) {
		t.Fatalf("err %v claims a deadline", err)
	}
	if we.Wait != time.Second || we.Budget != 500*time.Millisecond || we.Rule != "one" {
		t.Fatalf("WaitError %+v; want Rule one, Wait 1s, Budget 500ms", we)
	}
	if clk.Timers() != 0 || body.Closes() == 0 {
		t.Fatalf("timers %d, body closed %d; want no sleep and a closed body", clk.Timers(), body.Closes())
	}
	t.Run("a nearer deadline wins", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := roundTrip(tr, newReq(t, ctx, "GET", "http://x/")); !errors.Is(err, throttle.ErrBeyondDeadline) {
			t.Fatalf("err %v, want ErrBeyondDeadline", err)
		}
	})
	t.Run("without waiting: no request waits", func(t *testing.T) {
		tr, _ := fillBucket(t, okBase, throttle.WithoutWaiting())
		if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); !errors.Is(err, throttle.ErrBeyondMaxWait) {
			t.Fatalf("err %v, want ErrBeyondMaxWait", err)
		}
	})
}

// TestContractBodyClosed checks that every early return closes the request
// body exactly once and never calls the base transport.
func TestContractBodyClosed(t *testing.T) {
	called := make(chan struct{}, 10)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		called <- struct{}{}
		return okBase(r)
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		setup func(t *testing.T) (*throttle.Transport, context.Context, string) // transport, ctx, cost header
		want  error
	}{
		{"config error", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			return throttle.NewTransport(base, throttle.WithRules(throttle.Rule{Name: "bad"})), context.Background(), ""
		}, throttle.ErrInvalidRule},
		{"cost error", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			r := hourRule("c", 2)
			r.Cost = func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("Cost")); return n }
			return mustNew(t, base, throttle.WithRules(r)), context.Background(), "3"
		}, throttle.ErrInvalidRule},
		{"wait error", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			tr, _ := fillBucket(t, base, throttle.WithoutWaiting())
			<-called
			return tr, context.Background(), ""
		}, throttle.ErrBeyondMaxWait},
		{"queue full", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			tr, clk := fillBucket(t, base, throttle.WithMaxQueue(1))
			<-called
			// One waiter fills the queue; it is cancelled at cleanup.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- roundTrip(tr, newReq(t, ctx, "GET", "http://x/")) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("waiter: %v, want context.Canceled", err)
				}
			})
			// It is in the queue once it sleeps on its timer.
			clk.WaitTimers(1)
			return tr, context.Background(), ""
		}, throttle.ErrQueueFull},
		{"context already done", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			return mustNew(t, base, throttle.WithRules(hourRule("r", 1))), cancelled, ""
		}, context.Canceled},
		{"cancelled while waiting", func(t *testing.T) (*throttle.Transport, context.Context, string) {
			tr, clk := fillBucket(t, base)
			<-called
			ctx, cancel := context.WithCancel(context.Background())
			go func() { clk.WaitTimers(1); cancel() }()
			return tr, ctx, ""
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, ctx, cost := tt.setup(t)
			body := newRecBody()
			req := newReq(t, ctx, "POST", "http://x/", "Cost", cost)
			req.Body = body
			resp, err := tr.RoundTrip(req)
			if resp != nil || !errors.Is(err, tt.want) {
				t.Fatalf("RoundTrip = %v, %v; want nil, %v", resp, err, tt.want)
			}
			if n := body.Closes(); n != 1 {
				t.Fatalf("body closed %d times, want 1", n)
			}
			select {
			case <-called:
				t.Fatal("base called on an early return")
			default:
			}
		})
	}
}

// TestContractRequestUntouched compares the caller's request with a clone
// taken before RoundTrip, on the success path and on early returns.
func TestContractRequestUntouched(t *testing.T) {
	r := hourRule("keyed", 1)
	r.Key = throttle.KeyHeader("Authorization")
	r.Cost = func(*http.Request) int { return 1 }
	r.Match = throttle.Match{Host: "api.example", Methods: []string{"POST"}, PathPrefix: "/v1"}
	var got *http.Request
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return okBase(r)
	})
	tr := mustNew(t, base, throttle.WithClock(fakeclock.New(epoch)), throttle.WithoutWaiting(), throttle.WithRules(r))
	for _, wantErr := range []bool{false, true} {
		ctx := context.WithValue(context.Background(), ctxKey{}, "v")
		req := newReq(t, ctx, "POST", "https://api.example:443/v1/charges?x=1", "Authorization", "Bearer sk_secret")
		req.Body = newRecBody()
		before := req.Clone(ctx)
		err := roundTrip(tr, req)
		if (err != nil) != wantErr {
			t.Fatalf("err %v, want error %v", err, wantErr)
		}
		if !reflect.DeepEqual(req, before) {
			t.Fatalf("request modified:\n%+v\nwas\n%+v", req, before)
		}
		if req.Context() != ctx {
			t.Fatal("request context replaced")
		}
		if !wantErr && got != req {
			t.Fatal("the base did not get the caller's request as it was")
		}
	}
}

type ctxKey struct{}

type closeIdleBase struct {
	http.RoundTripper
	closed atomic.Int32
}

func (b *closeIdleBase) CloseIdleConnections() { b.closed.Add(1) }

func TestContractPassThrough(t *testing.T) {
	t.Run("response and error returned untouched", func(t *testing.T) {
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody}
		baseErr := errors.New("base failed")
		for _, tc := range []struct {
			resp *http.Response
			err  error
		}{{resp, nil}, {nil, baseErr}} {
			tr := mustNew(t, rtFunc(func(*http.Request) (*http.Response, error) { return tc.resp, tc.err }),
				throttle.WithRules(throttle.Rule{Name: "r", Limit: throttle.Limit{Rate: 1000, Period: time.Second, Burst: 10}}))
			gotResp, gotErr := tr.RoundTrip(newReq(t, context.Background(), "GET", "http://x/"))
			if gotResp != tc.resp || gotErr != tc.err {
				t.Fatalf("RoundTrip = %p, %v; want %p, %v", gotResp, gotErr, tc.resp, tc.err)
			}
		}
	})
	t.Run("CloseIdleConnections is passed through", func(t *testing.T) {
		b := &closeIdleBase{RoundTripper: okBase}
		throttle.NewTransport(b).CloseIdleConnections()
		if b.closed.Load() != 1 {
			t.Fatal("base's CloseIdleConnections not called")
		}
		throttle.NewTransport(okBase).CloseIdleConnections() // must not panic
		var _ interface{ CloseIdleConnections() } = (*throttle.Transport)(nil)
	})
	t.Run("real server through a nil base", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}))
		defer srv.Close()
		client := &http.Client{Transport: throttle.NewTransport(nil, throttle.WithRules(hourRule("r", 5)))}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

// TestConcurrentUse is for -race: many goroutines share one Transport
// across rules, partitions, waits, cancellations and rejections.
func TestConcurrentUse(t *testing.T) {
	keyed := throttle.Rule{Name: "keyed", Limit: throttle.Limit{Rate: 2000, Period: time.Second, Burst: 5}, Key: throttle.KeyHeader("K")}
	global := throttle.Rule{Name: "global", Limit: throttle.Limit{Rate: 5000, Period: time.Second, Burst: 20}}
	post := throttle.Rule{Name: "post", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 3}, Match: throttle.Match{Methods: []string{"POST"}}}
	tr := mustNew(t, okBase, throttle.WithMaxQueue(20), throttle.WithMaxWait(50*time.Millisecond), throttle.WithRules(keyed, global, post))
	var wg sync.WaitGroup
	var sent, rejected atomic.Int32
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				method := "GET"
				if i%10 == 0 {
					method = "POST"
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*10*time.Millisecond+time.Millisecond)
				err := roundTrip(tr, newReq(t, ctx, method, "http://x/", "K", strconv.Itoa(g%4)))
				cancel()
				if err == nil {
					sent.Add(1)
				} else {
					rejected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sent, %d rejected", sent.Load(), rejected.Load())
	if sent.Load() == 0 {
		t.Fatal("nothing sent")
	}
}
