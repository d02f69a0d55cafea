package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/store"
)

// departAsync enters b and departs in a goroutine, waiting wait with
// latest as its budget's end, and returns the slot and error it ends with.
func departAsync(t *testing.T, q *waitQueue, clk *fakeclock.Clock, b store.Bucket, wait time.Duration, latest time.Time) <-chan departed {
	t.Helper()
	if err := q.enter([]store.Bucket{b}); err != nil {
		t.Fatal(err)
	}
	done := make(chan departed, 1)
	go func() {
		defer q.leave([]store.Bucket{b})
		slot, err := q.depart(context.Background(), clk, []store.Bucket{b}, wait, anyLateness, latest)
		done <- departed{slot, err, clk.Now()}
	}()
	return done
}

// sleepingOne is a queue with one waiter of b asleep for wait, its budget
// ending at latest, on a fake clock at epoch.
func sleepingOne(t *testing.T, b store.Bucket, wait time.Duration, latest time.Time) (*fakeclock.Clock, *waitQueue, <-chan departed) {
	t.Helper()
	clk := fakeclock.New(epoch)
	q := newWaitQueue(10)
	d := departAsync(t, q, clk, b, wait, latest)
	clk.WaitTimers(1)
	return clk, q, d
}

type departed struct {
	slot time.Time
	err  error
	at   time.Time // the clock when depart returned
}

// TestWaitQueueStretch: a cap's stretch (store.Stretch) re-times the
// waiters asleep in its lane, as the store re-timed their slots: a slot
// after the stretch's start moves to start + (slot − start)·ratio (later
// for a cut, earlier for a raise), one before it stays, a waiter booked
// after the stretch stays, and one stretched beyond its budget fails at
// once with errStretched.
func TestWaitQueueStretch(t *testing.T) {
	b := store.Bucket{Key: "api", Rule: "api"}
	other := store.Bucket{Key: "other", Rule: "other"}

	t.Run("a slot after the start moves by the ratio", func(t *testing.T) {
		clk := fakeclock.New(epoch)
		q := newWaitQueue(10)
		far := epoch.Add(time.Hour)
		early := departAsync(t, q, clk, b, 100*time.Millisecond, far)
		late := departAsync(t, q, clk, b, 500*time.Millisecond, far)
		elsewhere := departAsync(t, q, clk, other, 500*time.Millisecond, far)
		clk.WaitTimers(3)
		// From 200 ms on, stretched twice: 500 ms → 800 ms.
		q.stretch([]string{"api"}, store.Stretch{Ratio: 2}, epoch.Add(200*time.Millisecond).UnixNano(), epoch.UnixNano())
		// Past the old slot: late's old timer fires, or was stopped, and
		// either way it sleeps again, until its new one.
		clk.Advance(600 * time.Millisecond)
		clk.WaitTimers(1)
		clk.Advance(400 * time.Millisecond)
		if d := <-early; d.err != nil || !d.slot.Equal(epoch.Add(100*time.Millisecond)) {
			t.Errorf("the slot before the start left %v at %v, want nil at 100ms", d.err, d.slot.Sub(epoch))
		}
		if d := <-late; d.err != nil || !d.slot.Equal(epoch.Add(800*time.Millisecond)) || d.at.Before(d.slot) {
			t.Errorf("the stretched slot left %v on %v at %v, want nil on 800ms, not before it", d.err, d.slot.Sub(epoch), d.at.Sub(epoch))
		}
		if d := <-elsewhere; d.err != nil || !d.slot.Equal(epoch.Add(500*time.Millisecond)) {
			t.Errorf("another bucket's slot left %v at %v, want nil at 500ms", d.err, d.slot.Sub(epoch))
		}
	})

	t.Run("a waiter booked after the stretch stays", func(t *testing.T) {
		clk := fakeclock.New(epoch)
		q := newWaitQueue(10)
		clk.Advance(10 * time.Millisecond)
		d := departAsync(t, q, clk, b, 500*time.Millisecond, epoch.Add(time.Hour))
		clk.WaitTimers(1)
		q.stretch([]string{"api"}, store.Stretch{Ratio: 3}, epoch.UnixNano(), epoch.Add(5*time.Millisecond).UnixNano())
		clk.Advance(500 * time.Millisecond)
		if r := <-d; r.err != nil || !r.slot.Equal(epoch.Add(510*time.Millisecond)) {
			t.Errorf("left %v at %v, want nil at 510ms", r.err, r.slot.Sub(epoch))
		}
	})

	t.Run("a stretch beyond the budget fails at once", func(t *testing.T) {
		clk, q, d := sleepingOne(t, b, 500*time.Millisecond, epoch.Add(time.Second))
		q.stretch([]string{"api"}, store.Stretch{Ratio: 3}, epoch.UnixNano(), epoch.UnixNano())
		r := <-d
		if !errors.Is(r.err, errStretched) || !r.slot.Equal(epoch.Add(1500*time.Millisecond)) || !r.at.Equal(epoch) {
			t.Errorf("got %v on %v at %v, want errStretched on 1.5s at once", r.err, r.slot.Sub(epoch), r.at.Sub(epoch))
		}
		if clk.Timers() != 0 {
			t.Errorf("%d timers left", clk.Timers())
		}
	})

	t.Run("a slot booked past latest, unmoved, is kept", func(t *testing.T) {
		clk, _, d := sleepingOne(t, b, 500*time.Millisecond, epoch.Add(400*time.Millisecond))
		clk.Advance(500 * time.Millisecond)
		if r := <-d; r.err != nil || !r.slot.Equal(epoch.Add(500*time.Millisecond)) {
			t.Errorf("left %v at %v, want nil at 500ms", r.err, r.slot.Sub(epoch))
		}
	})

	t.Run("a raise compresses; a ratio of 1, or none, moves nothing", func(t *testing.T) {
		clk, q, d := sleepingOne(t, b, 500*time.Millisecond, epoch.Add(time.Hour))
		q.stretch([]string{"api"}, store.Stretch{Ratio: 1}, epoch.UnixNano(), epoch.UnixNano())
		q.stretch([]string{"api"}, store.Stretch{}, epoch.UnixNano(), epoch.UnixNano())
		// From 100 ms on, halved: 500 ms → 300 ms.
		q.stretch([]string{"api"}, store.Stretch{Ratio: 0.5}, epoch.Add(100*time.Millisecond).UnixNano(), epoch.UnixNano())
		clk.Advance(299 * time.Millisecond)
		clk.WaitTimers(1)
		select {
		case r := <-d:
			t.Fatalf("left before its compressed slot: %+v", r)
		default:
		}
		clk.Advance(time.Millisecond)
		if r := <-d; r.err != nil || !r.slot.Equal(epoch.Add(300*time.Millisecond)) {
			t.Errorf("left %v at %v, want nil at 300ms", r.err, r.slot.Sub(epoch))
		}
	})
}

// TestStretchAt: store.Stretch.At's arithmetic, both ways, saturating.
func TestStretchAt(t *testing.T) {
	for _, c := range []struct {
		ratio            float64
		slot, from, want int64
	}{
		{1.5, 100, 200, 100},
		{1.5, 200, 200, 200},
		{1.5, 300, 200, 350},
		{0.5, 300, 200, 250},
		{1, 300, 200, 300},
		{0, 300, 200, 300},
	} {
		if got := (store.Stretch{Ratio: c.ratio}).At(c.slot, c.from); got != c.want {
			t.Errorf("ratio %v: At(%d, %d) = %d, want %d", c.ratio, c.slot, c.from, got, c.want)
		}
	}
	if got := (store.Stretch{Ratio: 1e300}).At(2, 1); got != 1<<63-1 {
		t.Errorf("a huge ratio gives %d, want the largest time", got)
	}
}
