package throttle

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

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
	tatBefore := localOf(t, tr).TATs()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := roundTrip(tr, newReq(t, ctx2, "GET", "http://x/")); !errors.As(err, &we) || we.Wait != time.Second {
		t.Fatalf("next request: %v; want a *WaitError needing 1s", err)
	}
	if got := localOf(t, tr).TATs(); !reflect.DeepEqual(got, tatBefore) {
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
	before := localOf(t, tr).TATs()

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
	if got := localOf(t, tr).TATs(); !reflect.DeepEqual(got, before) {
		t.Fatalf("cancelled slot not refunded: store %v, want %v", got, before)
	}
	// The next request gets the cancelled one's slot, one interval on.
	if at := releaseOne(t, tr, clk, seen, time.Second); !at.Equal(start.Add(time.Second)) {
		t.Fatalf("next request departed at +%v, want +1s", at.Sub(start))
	}
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
	peakLen := ls.Len()
	clk.Advance(time.Second + store.SweepEvery) // every TAT has passed, a sweep is due
	send(-2)
	afterAlloc, afterInuse := heap()
	mb := func(x uint64) float64 { return float64(x) / (1 << 20) }
	t.Logf("HeapAlloc: baseline %.1f MB, peak %.1f MB (%d buckets), after sweep %.1f MB (%d buckets)",
		mb(baseAlloc), mb(peakAlloc), peakLen, mb(afterAlloc), ls.Len())
	t.Logf("HeapInuse: baseline %.1f MB, peak %.1f MB, after sweep %.1f MB", mb(baseInuse), mb(peakInuse), mb(afterInuse))
	if peakLen < keys/2 {
		t.Fatalf("only %d buckets at the peak: the test did not load the store", peakLen)
	}
	if n := ls.Len(); n != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", n)
	}
	const slack = 4 << 20
	if afterAlloc > baseAlloc+slack || afterInuse > baseInuse+slack {
		t.Fatalf("heap not flat: HeapAlloc %.1f → %.1f MB, HeapInuse %.1f → %.1f MB",
			mb(baseAlloc), mb(afterAlloc), mb(baseInuse), mb(afterInuse))
	}
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
	tats := make([]int64, 0, n)
	for range n {
		before := ls.TAT("api")
		wg.Go(func() {
			resp, err := client.Get(srv.URL)
			if err == nil {
				_ = resp.Body.Close()
			}
			errs <- err
		})
		for ls.TAT("api") == before {
			runtime.Gosched()
		}
		tats = append(tats, ls.TAT("api"))
	}
	wg.Wait()
	// The limiter's own decisions: every booking moves the next slot at
	// least one interval on (GCRA: the later of the last slot and now,
	// plus an interval), and exactly one while the booked lead is ahead of
	// the bookings, which a booking slower than the lead (the first few,
	// on a busy machine) may not be: those are counted, not failed.
	late := 0
	for i := 1; i < n; i++ {
		switch d := time.Duration(tats[i] - tats[i-1]); {
		case d < time.Second/rate:
			t.Fatalf("booking %d moved the next slot %v, want at least %v", i, d, time.Second/rate)
		case d > time.Second/rate:
			late++
		}
	}
	if late > burst {
		t.Errorf("%d bookings moved the next slot more than one interval, want at most the burst's %d (the lead is %v by then)", late, burst, time.Duration(burst)*time.Second/rate)
	}
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

	// After the burst, n-burst requests depart one interval apart: the
	// pace is the least-squares slope of their arrival times over their
	// order, which weighs one late arrival as one point in 195. Never
	// faster than the rate (and never over burst + rate·t, below) is the
	// limiter's promise; slower is what a busy machine does to the
	// arrivals of slots booked exactly (checked above): in .ci/run, beside
	// the package's parallel tests, they drifted to 48.7-48.9/s (2026-12-05).
	// So only a gross shortfall fails: a limiter that keeps a tenth of
	// the rate back is broken, a machine seldom is for 4 s.
	observed := 1 / arrivalInterval(at[burst:]).Seconds()
	t.Logf("%d arrivals over %v: %.2f/s after the burst of %d (target %d/s)", n, at[n-1].Sub(at[0]), observed, burst, rate)
	if observed > rate*1.02 {
		t.Errorf("observed rate %.2f/s, want at most %d/s + 2%%", observed, rate)
	}
	if observed < rate*0.9 {
		t.Errorf("observed rate %.2f/s, want at least %d/s − 10%%", observed, rate)
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

// arrivalInterval returns the least-squares slope of the times at (sorted)
// over their index: the interval at which they arrive.
func arrivalInterval(at []time.Time) time.Duration {
	n := float64(len(at))
	var sx, sy, sxx, sxy float64
	for i, a := range at {
		x, y := float64(i), a.Sub(at[0]).Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return time.Duration((n*sxy - sx*sy) / (n*sxx - sx*sx) * float64(time.Second))
}

// TestNilBaseIsDefaultTransport: a nil base is http.DefaultTransport, also
// for a Transport with a configuration error (TestContractPassThrough
// sends through it).
func TestNilBaseIsDefaultTransport(t *testing.T) {
	if tr := NewTransport(nil); tr.base != http.DefaultTransport {
		t.Fatalf("base %T, want http.DefaultTransport", tr.base)
	}
	if tr := NewTransport(nil, WithRules(Rule{})); tr.base != http.DefaultTransport || tr.Err() == nil {
		t.Fatal("nil base with an invalid rule")
	}
}
