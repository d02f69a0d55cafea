package outage

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/store"
)

// gatedUndo is a primary's undo that takes a gate (store.Gated), as the
// Redis store's does: its refunds run through the gate, once.
type gatedUndo struct {
	gate    store.Gate
	done    atomic.Bool
	refunds atomic.Int32
	err     error // what a refund returns
}

func (u *gatedUndo) Gated(g store.Gate) store.Undo { u.gate = g; return u }

func (u *gatedUndo) Cancel(ctx context.Context) error {
	if u.done.Swap(true) {
		return nil
	}
	refund := func(context.Context) error { u.refunds.Add(1); return u.err }
	if u.gate != nil {
		return u.gate.Refund(ctx, refund)
	}
	return refund(ctx)
}

// TestPassOnGated: a Redis booking that takes a gate is passed on as it is,
// gated, unless a grace period's local slot goes with it; the gate refunds
// while the breaker is closed, not while it is open, and a failed refund
// opens it, as sharedBooking does.
func TestPassOnGated(t *testing.T) {
	clk := fakeclock.New(fbEpoch)
	newStore := func() *Store { return New(localstore.New(clk), clk, Options{}) }
	t.Run("closed: refunds once, from any copy", func(t *testing.T) {
		f := newStore()
		u := &gatedUndo{}
		r := store.Reservation{OK: true, Undo: f.passOn(u, 0)}
		if r.Undo != store.Undo(u) {
			t.Fatalf("passed on %T, want the primary's own undo", r.Undo)
		}
		c := r
		for _, x := range []*store.Reservation{&r, &c, &r} {
			if err := x.Cancel(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := u.refunds.Load(); n != 1 {
			t.Fatalf("%d refunds, want 1", n)
		}
	})
	t.Run("open: the slot stays spent", func(t *testing.T) {
		f := newStore()
		u := &gatedUndo{}
		r := store.Reservation{OK: true, Undo: f.passOn(u, 0)}
		f.brk.failure(clk.Now(), false, errors.New("down"))
		if err := r.Cancel(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := u.refunds.Load(); n != 0 {
			t.Fatalf("%d refunds through an open breaker, want 0", n)
		}
	})
	t.Run("a failed refund opens the breaker", func(t *testing.T) {
		f := newStore()
		u := &gatedUndo{err: errors.New("refund failed")}
		r := store.Reservation{OK: true, Undo: f.passOn(u, 0)}
		if err := r.Cancel(context.Background()); err == nil {
			t.Fatal("cancel: nil error, want the refund's")
		}
		if f.brk.closed() {
			t.Fatal("breaker closed after a failed refund")
		}
	})
	t.Run("with a grace slot: a sharedBooking around it", func(t *testing.T) {
		f := newStore()
		if _, ok := f.passOn(&gatedUndo{}, 1).(*sharedBooking); !ok {
			t.Fatal("a booking with a grace slot was not wrapped")
		}
	})
}
