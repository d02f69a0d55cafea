package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

func TestWaitQueue(t *testing.T) {
	a := bucket{key: "a", rule: "ra"}
	b := bucket{key: "b", rule: "rb"}

	t.Run("enter counts in every bucket, up to max", func(t *testing.T) {
		q := newWaitQueue(2)
		for range 2 {
			if err := q.enter([]bucket{a, b}); err != nil {
				t.Fatal(err)
			}
		}
		var qe *QueueFullError
		if err := q.enter([]bucket{b}); !errors.As(err, &qe) || qe.Rule != "rb" || qe.Waiting != 2 {
			t.Fatalf("err %v, want *QueueFullError{rb, 2}", err)
		}
		if err := q.full([]bucket{a}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("full: %v, want ErrQueueFull", err)
		}
	})

	t.Run("all or nothing: a full bucket counts in no bucket", func(t *testing.T) {
		q := newWaitQueue(1)
		if err := q.enter([]bucket{b}); err != nil {
			t.Fatal(err)
		}
		if err := q.enter([]bucket{a, b}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("err %v, want ErrQueueFull", err)
		}
		if err := q.enter([]bucket{a}); err != nil {
			t.Fatalf("a was counted by a rejected entry: %v", err)
		}
	})

	t.Run("leave frees the place and deletes empty keys", func(t *testing.T) {
		q := newWaitQueue(1)
		for range 3 {
			if err := q.enter([]bucket{a, b}); err != nil {
				t.Fatal(err)
			}
			q.leave([]bucket{a, b})
		}
		if len(q.lanes) != 0 {
			t.Fatalf("lanes map holds %v after everyone left", q.lanes)
		}
	})
}

func TestSleep(t *testing.T) {
	t.Run("no wait makes no timer", func(t *testing.T) {
		clk := fakeclock.New(epoch)
		for _, d := range []time.Duration{0, -time.Second} {
			if err := sleep(context.Background(), clk, d); err != nil || clk.Timers() != 0 {
				t.Fatalf("sleep(%v) = %v with %d timers", d, err, clk.Timers())
			}
		}
	})
	t.Run("returns when the clock reaches the wait", func(t *testing.T) {
		clk := fakeclock.New(epoch)
		done := make(chan error, 1)
		go func() { done <- sleep(context.Background(), clk, time.Second) }()
		clk.WaitTimers(1)
		clk.Advance(time.Second - 1)
		select {
		case err := <-done:
			t.Fatalf("returned early: %v", err)
		default:
		}
		clk.Advance(1)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cancel stops the timer", func(t *testing.T) {
		clk := fakeclock.New(epoch)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sleep(ctx, clk, time.Hour) }()
		clk.WaitTimers(1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if clk.Timers() != 0 {
			t.Fatal("timer not stopped")
		}
	})
}

// TestWaitQueueWarp: a waiter follows the re-timings of its limiter
// bucket's booked future while it sleeps, several in a row included, and
// no other bucket's.
func TestWaitQueueWarp(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	a := bucket{key: "a", rule: "ra", interval: time.Millisecond, cost: 1}
	b := bucket{key: "b", rule: "rb", interval: time.Millisecond, cost: 1}
	for _, tc := range []struct {
		name  string
		warps []struct {
			key string
			at  time.Duration
			k   float64
		}
		want time.Duration
	}{
		{name: "no warp", want: time.Second},
		{name: "a raise halves what is left", warps: []struct {
			key string
			at  time.Duration
			k   float64
		}{{"a", 200 * time.Millisecond, 0.5}}, want: 600 * time.Millisecond},
		{name: "a cut, then a raise", warps: []struct {
			key string
			at  time.Duration
			k   float64
		}{{"a", 100 * time.Millisecond, 2}, {"a", 300 * time.Millisecond, 0.25}}, want: 300*time.Millisecond + (1900*time.Millisecond-300*time.Millisecond)/4},
		{name: "another bucket's warp", warps: []struct {
			key string
			at  time.Duration
			k   float64
		}{{"b", 200 * time.Millisecond, 0.5}}, want: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(start)
			q := newWaitQueue(10)
			bs := []bucket{a, b}
			if err := q.enter(bs); err != nil {
				t.Fatal(err)
			}
			done := make(chan time.Time, 1)
			go func() {
				if err := q.depart(context.Background(), clk, bs, 0, time.Second, -1); err != nil {
					t.Error(err)
				}
				done <- clk.Now()
			}()
			clk.WaitTimers(1)
			for _, w := range tc.warps {
				clk.Set(start.Add(w.at))
				q.warp(w.key, clk.Now(), w.k)
				clk.WaitTimers(1)
			}
			// Step the clock until the waiter leaves.
			for {
				select {
				case at := <-done:
					if got := at.Sub(start); (got - tc.want).Abs() > 2*time.Millisecond {
						t.Errorf("left at %v, want %v", got, tc.want)
					}
					return
				default:
				}
				clk.Advance(time.Millisecond)
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
}
