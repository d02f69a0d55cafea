package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// okBase answers every request with a canned 200, without a network.
var okBase = rtFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
})

// recBody is a request body that records how often it was closed.
type recBody struct {
	io.Reader
	closed atomic.Int32
}

func newRecBody() *recBody      { return &recBody{Reader: strings.NewReader("payload")} }
func (b *recBody) Close() error { b.closed.Add(1); return nil }

// newReq returns a request for url with the given headers ("K", "V", ...).
func newReq(t testing.TB, ctx context.Context, method, url string, kv ...string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// mustNew builds a Transport or fails the test.
func mustNew(t testing.TB, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	tr, err := New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func localOf(t testing.TB, tr *Transport) *localStore {
	t.Helper()
	s, ok := tr.store.(*localStore)
	if !ok {
		t.Fatalf("store is %T, want *localStore", tr.store)
	}
	return s
}

// roundTrip sends r through tr and closes any response body.
func roundTrip(tr http.RoundTripper, r *http.Request) error {
	resp, err := tr.RoundTrip(r)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// TestTransportRate sends 200 concurrent requests through a 50/s burst-5
// rule to a real server, which records when each arrives. WithHeadroom(0)
// makes the configured rate the target. It takes about 4 s of real time.
//
// Arrivals are measured at the server, so each is late by its own latency
// (scheduling, -race, a shared 2-core machine). A request delayed past the
// next one's slot makes two arrive closer than one interval, so the window
// bound allows one request of slack beyond burst + rate·t.
func TestTransportRate(t *testing.T) {
	const (
		n     = 200
		rate  = 50
		burst = 5
	)
	arrivals := make(chan time.Time, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals <- time.Now()
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: n}
	defer base.CloseIdleConnections()

	// Open the connections the burst needs before measuring: a dial under
	// -race takes tens of ms and would bunch the first arrivals together.
	var warm sync.WaitGroup
	for range 2 * burst {
		warm.Go(func() { _ = roundTrip(base, newReq(t, context.Background(), "GET", srv.URL)) })
	}
	warm.Wait()
	for range 2 * burst {
		<-arrivals
	}

	tr := mustNew(t, base, WithHeadroom(0), WithRules(Rule{
		Name: "api", Limit: Limit{Rate: rate, Period: time.Second, Burst: burst},
	}))
	client := &http.Client{Transport: tr}
	errs := make(chan error, n)
	// The requests are all in flight together, but each books its slot
	// before the next goroutine starts: 200 goroutines booking at once
	// under -race keep the CPU busy for ~100 ms, which delays the timers
	// of the first slots and bunches their arrivals; that would measure
	// the test's own start-up, not the limiter.
	ls := localOf(t, tr)
	var wg sync.WaitGroup
	for range n {
		before := ls.tat("api")
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err == nil {
				_ = resp.Body.Close()
			}
			errs <- err
		})
		for ls.tat("api") == before {
			runtime.Gosched()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	close(arrivals)
	var at []time.Time
	for a := range arrivals {
		at = append(at, a)
	}
	if len(at) != n {
		t.Fatalf("server saw %d requests, want %d", len(at), n)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })

	// After the burst, n-burst requests depart one interval apart.
	span := at[n-1].Sub(at[0])
	observed := float64(n-burst) / span.Seconds()
	t.Logf("%d arrivals over %v: %.2f/s after the burst of %d (target %d/s)", n, span, observed, burst, rate)
	if observed < rate*0.98 || observed > rate*1.02 {
		t.Errorf("observed rate %.2f/s, want %d/s ± 2%%", observed, rate)
	}
	worst, violations := 0.0, 0
	for i := range at {
		for j := i; j < n; j++ {
			count := float64(j - i + 1)
			bound := burst + rate*at[j].Sub(at[i]).Seconds() + 1
			if count > bound {
				violations++
				if violations <= 5 {
					t.Errorf("arrivals %d..%d: %v in %v, bound %.2f", i, j, count, at[j].Sub(at[i]), bound)
				}
			}
			worst = max(worst, count-(bound-1))
		}
	}
	t.Logf("worst window: %.2f requests over burst + rate·t (allowed: 1); %d windows over", worst, violations)
}

// TestTransportFIFO queues waiters one at a time on a fake clock, then
// advances it one interval at a time: exactly the next waiter, in order,
// reaches the base transport each time.
func TestTransportFIFO(t *testing.T) {
	const waiters = 8
	iv := 100 * time.Millisecond
	clk := fakeclock.New(epoch)
	released := make(chan int, waiters+1)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		id, _ := strconv.Atoi(r.Header.Get("Id"))
		released <- id
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(clk), WithHeadroom(0), WithRules(Rule{
		Name: "fifo", Limit: Limit{Rate: 10, Period: time.Second, Burst: 1},
	}))
	if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/", "Id", "0")); err != nil {
		t.Fatal(err)
	}
	if id := <-released; id != 0 {
		t.Fatalf("released %d, want 0", id)
	}
	errs := make(chan error, waiters)
	for i := 1; i <= waiters; i++ {
		go func() {
			errs <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/", "Id", strconv.Itoa(i)))
		}()
		clk.WaitTimers(i) // waiter i is asleep before waiter i+1 books
	}
	for i := 1; i <= waiters; i++ {
		clk.Advance(iv)
		select {
		case id := <-released:
			if id != i {
				t.Fatalf("advance %d released waiter %d, want %d", i, id, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("advance %d released nobody", i)
		}
		if got := clk.Timers(); got != waiters-i {
			t.Fatalf("after advance %d: %d waiters asleep, want %d", i, got, waiters-i)
		}
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-released:
		t.Fatalf("extra release of %d", id)
	default:
	}
}

// fillBucket books the one slot of a burst-1 rule and returns the rule's
// Transport (fake clock at epoch, headroom 0, interval 1 s).
func fillBucket(t *testing.T, base http.RoundTripper, opts ...Option) (*Transport, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(time.Now())
	return fillBucketOn(t, clk, base, opts...), clk
}

// fillBucketOn is fillBucket with the fake clock given.
func fillBucketOn(t *testing.T, clk *fakeclock.Clock, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	opts = append([]Option{WithClock(clk), WithHeadroom(0), WithRules(Rule{
		Name: "one", Limit: Limit{Rate: 1, Period: time.Second, Burst: 1},
	})}, opts...)
	tr := mustNew(t, base, opts...)
	if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTransportDeadline(t *testing.T) {
	tr, clk := fillBucket(t, okBase)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	body := newRecBody()
	req := newReq(t, ctx, "POST", "http://x/")
	req.Body = body
	start := time.Now()
	err := roundTrip(tr, req)
	elapsed := time.Since(start)

	var we *WaitError
	if !errors.As(err, &we) {
		t.Fatalf("err %v (%T), want *WaitError", err, err)
	}
	if !errors.Is(err, ErrBeyondDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v: want ErrBeyondDeadline and context.DeadlineExceeded", err)
	}
	if errors.Is(err, ErrBeyondMaxWait) {
		t.Fatalf("err %v also matches ErrBeyondMaxWait", err)
	}
	// The budget is the deadline less the fake clock's now, which started
	// at the real time a moment before the context: about 500 ms.
	if we.Wait != time.Second || we.Rule != "one" || we.Budget >= we.Wait || we.Budget <= 0 {
		t.Fatalf("WaitError %+v: want Rule one, Wait 1s, 0 < Budget < 1s", we)
	}
	if clk.Timers() != 0 {
		t.Fatal("a timer was created: the request slept")
	}
	if elapsed > 400*time.Millisecond {
		t.Fatalf("failing took %v: the request slept", elapsed)
	}
	if body.closed.Load() == 0 {
		t.Fatal("body not closed")
	}
	// The slot was not consumed: the store is as before, and the next
	// request is told the same wait (it would be 2 s had the slot gone).
	tatBefore := localOf(t, tr).snapshot()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := roundTrip(tr, newReq(t, ctx2, "GET", "http://x/")); !errors.As(err, &we) || we.Wait != time.Second {
		t.Fatalf("next request: %v; want a *WaitError needing 1s", err)
	}
	if got := localOf(t, tr).snapshot(); !reflect.DeepEqual(got, tatBefore) {
		t.Fatalf("store changed by a rejected request: %v → %v", tatBefore, got)
	}
}

// releaseOne runs a request in the background, waits until it sleeps,
// advances the clock by d, and returns the clock time at which the base
// transport received it.
func releaseOne(t *testing.T, tr *Transport, clk *fakeclock.Clock, seen <-chan time.Time, d time.Duration) time.Time {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")) }()
	clk.WaitTimers(1)
	clk.Advance(d)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return <-seen
}

func TestTransportCancelRefunds(t *testing.T) {
	seen := make(chan time.Time, 10)
	clk := fakeclock.New(time.Now())
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		seen <- clk.Now()
		return okBase(r)
	})
	tr := fillBucketOn(t, clk, base)
	<-seen
	start := clk.Now()
	before := localOf(t, tr).snapshot()

	ctx, cancel := context.WithCancel(context.Background())
	body := newRecBody()
	req := newReq(t, ctx, "POST", "http://x/")
	req.Body = body
	errs := make(chan error, 1)
	go func() { errs <- roundTrip(tr, req) }()
	clk.WaitTimers(1)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if body.closed.Load() == 0 {
		t.Fatal("body not closed")
	}
	if n := clk.Timers(); n != 0 {
		t.Fatalf("%d timers left behind", n)
	}
	if got := localOf(t, tr).snapshot(); !reflect.DeepEqual(got, before) {
		t.Fatalf("cancelled slot not refunded: store %v, want %v", got, before)
	}
	// The next request gets the cancelled one's slot, one interval on.
	if at := releaseOne(t, tr, clk, seen, time.Second); !at.Equal(start.Add(time.Second)) {
		t.Fatalf("next request departed at +%v, want +1s", at.Sub(start))
	}
}

func TestTransportMaxWait(t *testing.T) {
	tr, clk := fillBucket(t, okBase, WithMaxWait(500*time.Millisecond))
	body := newRecBody()
	req := newReq(t, context.Background(), "POST", "http://x/")
	req.Body = body
	err := roundTrip(tr, req)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, ErrBeyondMaxWait) {
		t.Fatalf("err %v, want *WaitError wrapping ErrBeyondMaxWait", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBeyondDeadline) {
		t.Fatalf("err %v claims a deadline", err)
	}
	if we.Wait != time.Second || we.Budget != 500*time.Millisecond || we.Rule != "one" {
		t.Fatalf("WaitError %+v; want Rule one, Wait 1s, Budget 500ms", we)
	}
	if clk.Timers() != 0 || body.closed.Load() == 0 {
		t.Fatalf("timers %d, body closed %d; want no sleep and a closed body", clk.Timers(), body.closed.Load())
	}
	t.Run("a nearer deadline wins", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := roundTrip(tr, newReq(t, ctx, "GET", "http://x/")); !errors.Is(err, ErrBeyondDeadline) {
			t.Fatalf("err %v, want ErrBeyondDeadline", err)
		}
	})
	t.Run("without waiting: no request waits", func(t *testing.T) {
		tr, _ := fillBucket(t, okBase, WithoutWaiting())
		if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); !errors.Is(err, ErrBeyondMaxWait) {
			t.Fatalf("err %v, want ErrBeyondMaxWait", err)
		}
	})
}

// TestDurationOptionsDefaultAtZero: a duration option given d ≤ 0 takes its
// default, as WithRedisTimeout does; WithoutWaiting is how not to wait, and
// the last of it and WithMaxWait wins.
func TestDurationOptionsDefaultAtZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"WithMaxWait(0)", []Option{WithMaxWait(0)}, 30 * time.Second},
		{"WithMaxWait(-1s)", []Option{WithMaxWait(-time.Second)}, 30 * time.Second},
		{"WithMaxWait(2s)", []Option{WithMaxWait(2 * time.Second)}, 2 * time.Second},
		{"WithoutWaiting", []Option{WithoutWaiting()}, 0},
		{"WithMaxWait then WithoutWaiting", []Option{WithMaxWait(time.Second), WithoutWaiting()}, 0},
		{"WithoutWaiting then WithMaxWait", []Option{WithoutWaiting(), WithMaxWait(time.Second)}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustNew(t, okBase, tc.opts...).maxWait; got != tc.want {
				t.Fatalf("max wait %v, want %v", got, tc.want)
			}
		})
	}
	for _, d := range []time.Duration{0, -time.Second} {
		cfg := defaultConfig()
		WithRedisTimeout(d).apply(&cfg)
		if got := cfg.redis.outage.withDefaults().timeout; got != 50*time.Millisecond {
			t.Errorf("WithRedisTimeout(%v): timeout %v, want the documented 50ms", d, got)
		}
	}
}

func TestTransportMaxQueue(t *testing.T) {
	const maxQ = 3
	t.Run("sequential: the n+1th waiter is rejected", func(t *testing.T) {
		tr, clk := fillBucket(t, okBase, WithMaxQueue(maxQ))
		errs := make(chan error, maxQ)
		for i := 1; i <= maxQ; i++ {
			go func() { errs <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")) }()
			clk.WaitTimers(i)
		}
		body := newRecBody()
		req := newReq(t, context.Background(), "POST", "http://x/")
		req.Body = body
		err := roundTrip(tr, req)
		var qe *QueueFullError
		if !errors.As(err, &qe) || !errors.Is(err, ErrQueueFull) || qe.Waiting != maxQ || qe.Rule != "one" {
			t.Fatalf("err %v, want *QueueFullError{Rule: one, Waiting: %d}", err, maxQ)
		}
		if body.closed.Load() == 0 {
			t.Fatal("body not closed")
		}
		for range maxQ {
			clk.Advance(time.Second)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("concurrent: exactly n waiters admitted", func(t *testing.T) {
		const n = 20
		tr, clk := fillBucket(t, okBase, WithMaxQueue(maxQ))
		errs := make(chan error, n)
		for range n {
			go func() { errs <- roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")) }()
		}
		for range n - maxQ {
			if err := <-errs; !errors.Is(err, ErrQueueFull) {
				t.Fatalf("err %v, want ErrQueueFull", err)
			}
		}
		clk.WaitTimers(maxQ)
		if got := clk.Timers(); got != maxQ {
			t.Fatalf("%d waiters asleep, want %d", got, maxQ)
		}
		// Rejected requests that had booked give their slot back only when
		// it is still the last one, so admitted waiters may sit further out
		// than one interval each; advance until all have gone.
		for done := 0; done < maxQ; {
			clk.Advance(time.Second)
			for more := true; more; {
				select {
				case err := <-errs:
					if err != nil {
						t.Fatal(err)
					}
					done++
				case <-time.After(50 * time.Millisecond):
					more = false
				}
			}
		}
	})
	t.Run("zero max queue still lets a request that need not wait go", func(t *testing.T) {
		tr := mustNew(t, okBase, WithMaxQueue(0), WithRules(Rule{
			Name: "q", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 2},
		}))
		if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); err != nil {
			t.Fatalf("first request of an empty bucket: %v", err)
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
		setup func(t *testing.T) (*Transport, context.Context, string) // transport, ctx, cost header
		want  error
	}{
		{"config error", func(t *testing.T) (*Transport, context.Context, string) {
			return NewTransport(base, WithRules(Rule{Name: "bad"})), context.Background(), ""
		}, ErrInvalidRule},
		{"cost error", func(t *testing.T) (*Transport, context.Context, string) {
			r := hourRule("c", 2)
			r.Cost = func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("Cost")); return n }
			return mustNew(t, base, WithRules(r)), context.Background(), "3"
		}, ErrInvalidRule},
		{"wait error", func(t *testing.T) (*Transport, context.Context, string) {
			tr, _ := fillBucket(t, base, WithoutWaiting())
			<-called
			return tr, context.Background(), ""
		}, ErrBeyondMaxWait},
		{"queue full", func(t *testing.T) (*Transport, context.Context, string) {
			tr, _ := fillBucket(t, base, WithMaxQueue(1))
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
			for {
				tr.queue.mu.Lock()
				n := len(tr.queue.lanes)
				tr.queue.mu.Unlock()
				if n == 1 {
					break
				}
				runtime.Gosched()
			}
			return tr, context.Background(), ""
		}, ErrQueueFull},
		{"context already done", func(t *testing.T) (*Transport, context.Context, string) {
			return mustNew(t, base, WithRules(hourRule("r", 1))), cancelled, ""
		}, context.Canceled},
		{"cancelled while waiting", func(t *testing.T) (*Transport, context.Context, string) {
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
			if n := body.closed.Load(); n != 1 {
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
	r.Key = KeyHeader("Authorization")
	r.Cost = func(*http.Request) int { return 1 }
	r.Match = Match{Host: "api.example", Methods: []string{"POST"}, PathPrefix: "/v1"}
	var got *http.Request
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(fakeclock.New(epoch)), WithoutWaiting(), WithRules(r))
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
				WithRules(Rule{Name: "r", Limit: Limit{Rate: 1000, Period: time.Second, Burst: 10}}))
			gotResp, gotErr := tr.RoundTrip(newReq(t, context.Background(), "GET", "http://x/"))
			if gotResp != tc.resp || gotErr != tc.err {
				t.Fatalf("RoundTrip = %p, %v; want %p, %v", gotResp, gotErr, tc.resp, tc.err)
			}
		}
	})
	t.Run("CloseIdleConnections is passed through", func(t *testing.T) {
		b := &closeIdleBase{RoundTripper: okBase}
		NewTransport(b).CloseIdleConnections()
		if b.closed.Load() != 1 {
			t.Fatal("base's CloseIdleConnections not called")
		}
		NewTransport(okBase).CloseIdleConnections() // must not panic
		var _ interface{ CloseIdleConnections() } = (*Transport)(nil)
	})
	t.Run("nil base is http.DefaultTransport", func(t *testing.T) {
		if tr := NewTransport(nil); tr.base != http.DefaultTransport {
			t.Fatalf("base %T, want http.DefaultTransport", tr.base)
		}
		if tr := NewTransport(nil, WithRules(Rule{})); tr.base != http.DefaultTransport || tr.Err() == nil {
			t.Fatal("nil base with an invalid rule")
		}
	})
	t.Run("real server through a nil base", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
		}))
		defer srv.Close()
		client := &http.Client{Transport: NewTransport(nil, WithRules(hourRule("r", 5)))}
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
	keyed := Rule{Name: "keyed", Limit: Limit{Rate: 2000, Period: time.Second, Burst: 5}, Key: KeyHeader("K")}
	global := Rule{Name: "global", Limit: Limit{Rate: 5000, Period: time.Second, Burst: 20}}
	post := Rule{Name: "post", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 3}, Match: Match{Methods: []string{"POST"}}}
	tr := mustNew(t, okBase, WithMaxQueue(20), WithMaxWait(50*time.Millisecond), WithRules(keyed, global, post))
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

// TestMemoryFlat books 1 000 000 distinct partition keys, lets them all go
// idle, and checks that one more request sweeps them and the heap returns
// to its baseline.
func TestMemoryFlat(t *testing.T) {
	const keys = 1_000_000
	clk := fakeclock.New(epoch)
	r := Rule{Name: "per-customer", Limit: Limit{Rate: 10, Period: time.Second, Burst: 1}, Key: KeyHeader("Customer")}
	canned := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	base := rtFunc(func(*http.Request) (*http.Response, error) { return canned, nil })
	tr := mustNew(t, base, WithClock(clk), WithRules(r))
	ls := localOf(t, tr)
	req := newReq(t, context.Background(), "GET", "http://x/")
	send := func(i int) {
		// Reusing one request between calls keeps the loop's own garbage
		// out of the figures; RoundTrip does not keep it.
		req.Header.Set("Customer", strconv.Itoa(i))
		if err := roundTrip(tr, req); err != nil {
			t.Fatal(err)
		}
	}
	var ms runtime.MemStats
	heap := func() (alloc, inuse uint64) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, ms.HeapInuse
	}
	send(-1) // the Transport's own first allocations belong to the baseline
	baseAlloc, baseInuse := heap()
	for i := range keys {
		send(i)
	}
	peakAlloc, peakInuse := heap()
	peakLen := ls.len()
	clk.Advance(time.Second + store.SweepEvery) // every TAT has passed, a sweep is due
	send(-2)
	afterAlloc, afterInuse := heap()
	mb := func(x uint64) float64 { return float64(x) / (1 << 20) }
	t.Logf("HeapAlloc: baseline %.1f MB, peak %.1f MB (%d buckets), after sweep %.1f MB (%d buckets)",
		mb(baseAlloc), mb(peakAlloc), peakLen, mb(afterAlloc), ls.len())
	t.Logf("HeapInuse: baseline %.1f MB, peak %.1f MB, after sweep %.1f MB", mb(baseInuse), mb(peakInuse), mb(afterInuse))
	if peakLen < keys/2 {
		t.Fatalf("only %d buckets at the peak: the test did not load the store", peakLen)
	}
	if n := ls.len(); n != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", n)
	}
	const slack = 4 << 20
	if afterAlloc > baseAlloc+slack || afterInuse > baseInuse+slack {
		t.Fatalf("heap not flat: HeapAlloc %.1f → %.1f MB, HeapInuse %.1f → %.1f MB",
			mb(baseAlloc), mb(afterAlloc), mb(baseInuse), mb(afterInuse))
	}
}
