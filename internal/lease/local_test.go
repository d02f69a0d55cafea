package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/lease"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// acquireAsync starts an Acquire and reports its result on the channel.
type result struct {
	l   *lease.Lease
	err error
}

func acquireAsync(s lease.Store, caps []lease.Cap, p lease.Priority, maxWait time.Duration) chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := s.Acquire(context.Background(), caps, p, maxWait)
		ch <- result{l, err}
	}()
	return ch
}

func one(key string, limit int) []lease.Cap {
	return []lease.Cap{{Key: key, Rule: "r-" + key, Limit: limit}}
}

func TestLocalOrder(t *testing.T) {
	type arrival struct {
		name  string
		p     lease.Priority
		after time.Duration // since the previous arrival
	}
	cases := []struct {
		name     string
		arrivals []arrival
		want     []string
	}{
		{"fifo within a level", []arrival{{"a", lease.Normal, 0}, {"b", lease.Normal, time.Millisecond}, {"c", lease.Normal, time.Millisecond}}, []string{"a", "b", "c"}},
		{"high first", []arrival{{"low", lease.Low, 0}, {"normal", lease.Normal, time.Millisecond}, {"high", lease.High, time.Millisecond}}, []string{"high", "normal", "low"}},
		{"aged low precedes new high", []arrival{{"low", lease.Low, 0}, {"high", lease.High, 2*time.Second + time.Millisecond}}, []string{"low", "high"}},
		{"low within two steps yields", []arrival{{"low", lease.Low, 0}, {"high", lease.High, 2*time.Second - time.Millisecond}}, []string{"high", "low"}},
		{"aged normal precedes new high", []arrival{{"normal", lease.Normal, 0}, {"high", lease.High, time.Second + time.Millisecond}}, []string{"normal", "high"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(t0)
			l := lease.NewLocal(lease.WithClock(clk))
			caps := one("k", 1)
			first, err := l.Acquire(context.Background(), caps, lease.Normal, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan string, len(tc.arrivals))
			var wg sync.WaitGroup
			for i, a := range tc.arrivals {
				clk.Advance(a.after)
				r := acquireAsync(l, caps, a.p, time.Hour)
				clk.WaitTimers(i + 1) // queued
				wg.Add(1)
				go func(name string, r chan result) {
					defer wg.Done()
					res := <-r
					if res.err != nil {
						got <- "error: " + res.err.Error()
						return
					}
					got <- name
					time.Sleep(5 * time.Millisecond) // let the order show
					res.l.Release()
				}(a.name, r)
			}
			first.Release()
			wg.Wait()
			close(got)
			var order []string
			for g := range got {
				order = append(order, g)
			}
			if len(order) != len(tc.want) {
				t.Fatalf("order %v, want %v", order, tc.want)
			}
			for i := range order {
				if order[i] != tc.want[i] {
					t.Fatalf("order %v, want %v", order, tc.want)
				}
			}
			if n := l.Held("k"); n != 0 {
				t.Fatalf("held %d after all released", n)
			}
		})
	}
}

func TestLocalAllOrNone(t *testing.T) {
	l := lease.NewLocal()
	a, b := lease.Cap{Key: "a", Rule: "ra", Limit: 1}, lease.Cap{Key: "b", Rule: "rb", Limit: 2}
	hb, err := l.Acquire(context.Background(), []lease.Cap{b}, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	ha, err := l.Acquire(context.Background(), []lease.Cap{a}, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	// a is full: a request for a and b takes neither.
	_, err = l.Acquire(context.Background(), []lease.Cap{b, a}, lease.Normal, 0)
	var te *lease.TimeoutError
	if !errors.As(err, &te) || te.Rule != "ra" || !errors.Is(err, lease.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want a TimeoutError of rule ra", err)
	}
	if l.Held("b") != 1 {
		t.Fatalf("b held %d, want 1: a failed request took a lease", l.Held("b"))
	}
	r := acquireAsync(l, []lease.Cap{a, b}, lease.Normal, time.Minute)
	time.Sleep(10 * time.Millisecond)
	ha.Release()
	ha.Release() // idempotent
	res := <-r
	if res.err != nil {
		t.Fatal(res.err)
	}
	if l.Held("a") != 1 || l.Held("b") != 2 {
		t.Fatalf("held a=%d b=%d, want 1 and 2", l.Held("a"), l.Held("b"))
	}
	res.l.Release()
	hb.Release()
	if l.Held("a") != 0 || l.Held("b") != 0 {
		t.Fatalf("held a=%d b=%d after release", l.Held("a"), l.Held("b"))
	}
}

func TestLocalWaitEnds(t *testing.T) {
	clk := fakeclock.New(t0)
	l := lease.NewLocal(lease.WithClock(clk))
	caps := one("k", 1)
	h, err := l.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("maxWait", func(t *testing.T) {
		r := acquireAsync(l, caps, lease.Normal, 3*time.Second)
		clk.WaitTimers(1)
		clk.Advance(3 * time.Second)
		res := <-r
		var te *lease.TimeoutError
		if !errors.As(res.err, &te) || te.Waited != 3*time.Second {
			t.Fatalf("err %v, want a TimeoutError after 3s", res.err)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, caps, lease.Normal, time.Hour)
			ch <- err
		}()
		clk.WaitTimers(1)
		cancel()
		if err := <-ch; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
	t.Run("a waiter that left frees its place", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, caps, lease.High, time.Hour)
			ch <- err
		}()
		clk.WaitTimers(1)
		r := acquireAsync(l, caps, lease.Low, time.Hour)
		clk.WaitTimers(2)
		cancel()
		if err := <-ch; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		h.Release()
		res := <-r
		if res.err != nil {
			t.Fatal(res.err)
		}
		res.l.Release()
	})
	if l.Held("k") != 0 {
		t.Fatalf("held %d", l.Held("k"))
	}
}

func TestInvalidCaps(t *testing.T) {
	l := lease.NewLocal()
	for name, caps := range map[string][]lease.Cap{
		"none":       nil,
		"zero limit": {{Key: "a"}},
		"same key":   {{Key: "a", Limit: 1}, {Key: "a", Limit: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := l.Acquire(context.Background(), caps, lease.Normal, 0); !errors.Is(err, lease.ErrInvalidCap) {
				t.Fatalf("err %v, want ErrInvalidCap", err)
			}
		})
	}
}

func TestLocalConcurrent(t *testing.T) {
	l := lease.NewLocal()
	caps := one("k", 3)
	var mu sync.Mutex
	in, peak := 0, 0
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls, err := l.Acquire(context.Background(), caps, lease.Priority(i%3-1), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			in++
			peak = max(peak, in)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			in--
			mu.Unlock()
			ls.Release()
		}()
	}
	wg.Wait()
	if peak != 3 {
		t.Fatalf("peak %d in flight, want 3", peak)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestLocalClockBackwards: after the clock jumps back an hour, a new request
// does not overtake the one waiting since before the jump.
func TestLocalClockBackwards(t *testing.T) {
	clk := fakeclock.New(t0)
	l := lease.NewLocal(lease.WithClock(clk))
	caps := one("k", 1)
	h, err := l.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := acquireAsync(l, caps, lease.Normal, time.Hour)
	clk.WaitTimers(1)
	clk.Set(t0.Add(-time.Hour))
	late := acquireAsync(l, caps, lease.Normal, time.Hour)
	clk.WaitTimers(2)
	h.Release()
	r := <-old
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case <-late:
		t.Fatal("the request that came after the jump was served first")
	default:
	}
	r.l.Release()
	r = <-late
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release()
}

// TestReleaseConcurrent: Release from many goroutines at once gives the
// lease back exactly once.
func TestReleaseConcurrent(t *testing.T) {
	l := lease.NewLocal()
	caps := one("k", 2)
	a, err := l.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Release()
		}()
	}
	wg.Wait()
	if n := l.Held("k"); n != 1 {
		t.Fatalf("held %d after 16 releases of one of 2 leases, want 1", n)
	}
	b.Release()
}
