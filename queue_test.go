package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

func TestWaitQueue(t *testing.T) {
	a := store.Bucket{Key: "a", Rule: "ra"}
	b := store.Bucket{Key: "b", Rule: "rb"}

	t.Run("enter counts in every bucket, up to max", func(t *testing.T) {
		q := newWaitQueue(2)
		for range 2 {
			if err := q.enter([]store.Bucket{a, b}); err != nil {
				t.Fatal(err)
			}
		}
		var qe *QueueFullError
		if err := q.enter([]store.Bucket{b}); !errors.As(err, &qe) || qe.Rule != "rb" || qe.Waiting != 2 {
			t.Fatalf("err %v, want *QueueFullError{rb, 2}", err)
		}
		if err := q.full([]store.Bucket{a}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("full: %v, want ErrQueueFull", err)
		}
	})

	t.Run("all or nothing: a full bucket counts in no bucket", func(t *testing.T) {
		q := newWaitQueue(1)
		if err := q.enter([]store.Bucket{b}); err != nil {
			t.Fatal(err)
		}
		if err := q.enter([]store.Bucket{a, b}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("err %v, want ErrQueueFull", err)
		}
		if err := q.enter([]store.Bucket{a}); err != nil {
			t.Fatalf("a was counted by a rejected entry: %v", err)
		}
	})

	t.Run("leave frees the place and deletes empty keys", func(t *testing.T) {
		q := newWaitQueue(1)
		for range 3 {
			if err := q.enter([]store.Bucket{a, b}); err != nil {
				t.Fatal(err)
			}
			q.leave([]store.Bucket{a, b})
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
