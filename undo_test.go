package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// undoBucket refills one slot every 100 ms, a burst of one: the n-th
// booking in a row (from 0) waits n × 100 ms, in every store.
var undoBucket = store.Bucket{Key: "undo", Rule: "undo", Interval: 100 * time.Millisecond, Burst: 1, Cost: 1}

// undoStores makes, for each store, a fresh one whose clock stands still
// (clk): waits come out exact. Each is in the mode its name says when
// returned.
func undoStores(t *testing.T) map[string]func(t *testing.T, clk *fakeclock.Clock) store.Store {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	return map[string]func(t *testing.T, clk *fakeclock.Clock) store.Store{
		"local": func(_ *testing.T, clk *fakeclock.Clock) store.Store { return newLocalStore(clk) },
		"redis": func(t *testing.T, clk *fakeclock.Clock) store.Store {
			return redisStoreAt(rdb, testNamespace(t), clk)
		},
		"outage store, shared (Redis)": func(t *testing.T, clk *fakeclock.Clock) store.Store {
			os, _ := redisOutageStore(redisSettings{rdb: rdb, namespace: testNamespace(t), outage: defaultOutageSettings(),
				nowMicros: func() int64 { return clk.Now().UnixMicro() }}, clk, nil)
			return os
		},
		"outage store, fallback (local buckets)": func(t *testing.T, clk *fakeclock.Clock) store.Store {
			// the local buckets run the whole rule
			f := outage.New(downStore{}, clk, outage.Options{Share: 1})
			if _, err := f.Reserve(context.Background(), []store.Bucket{{Key: "trip", Rule: "trip", Interval: time.Millisecond, Burst: 1, Cost: 1}}, 0); err != nil {
				t.Fatal(err)
			}
			if Mode(f.Mode()) != ModeFallback {
				t.Fatalf("mode %v, want fallback", Mode(f.Mode()))
			}
			return f
		},
	}
}

// TestReservationUndo: a reservation gives its booking back itself, in
// every store, from any copy, once.
func TestReservationUndo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Each case books from a fresh bucket and checks the wait of the next
	// booking: 100 ms × the slots still booked ahead of it.
	cases := []struct {
		name string
		run  func(t *testing.T, book func() store.Reservation) time.Duration
		want time.Duration
	}{{
		name: "cancel gives the last slot back",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			r := book()
			mustCancel(t, &r)
			return book().Wait
		},
		want: 100 * time.Millisecond,
	}, {
		name: "a copy cancels the same booking",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			r := book()
			c := r
			mustCancel(t, &c)
			return book().Wait
		},
		want: 100 * time.Millisecond,
	}, {
		name: "a copy in a copied slice cancels the same booking",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			rs := []store.Reservation{book()}
			cp := append([]store.Reservation(nil), rs...)
			rs[0] = store.Reservation{}
			mustCancel(t, &cp[0])
			return book().Wait
		},
		want: 100 * time.Millisecond,
	}, {
		name: "a second cancel, of a copy, gives nothing back",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			r := book()
			c := r
			mustCancel(t, &r)
			// The next booking takes the same slot again: a second undo
			// of r would find it last and give it away.
			if w := book().Wait; w != 100*time.Millisecond {
				t.Fatalf("after the cancel, wait %v, want the 100ms slot", w)
			}
			mustCancel(t, &c)
			mustCancel(t, &r)
			return book().Wait
		},
		want: 200 * time.Millisecond,
	}, {
		name: "a slot with a booking behind it stays spent",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			r := book()
			book()
			mustCancel(t, &r)
			return book().Wait
		},
		want: 300 * time.Millisecond,
	}, {
		name: "a reservation that booked nothing cancels nothing",
		run: func(t *testing.T, book func() store.Reservation) time.Duration {
			book()
			var zero store.Reservation
			mustCancel(t, &zero)
			return book().Wait
		},
		want: 100 * time.Millisecond,
	}}
	for name, mk := range undoStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					clk := fakeclock.New(undoEpoch)
					s := mk(t, clk)
					book := func() store.Reservation {
						t.Helper()
						r, err := s.Reserve(ctx, []store.Bucket{undoBucket}, time.Hour)
						if err != nil || !r.OK {
							t.Fatalf("reserve: %+v, %v", r, err)
						}
						return r
					}
					if got := tc.run(t, book); got != tc.want {
						t.Fatalf("next wait %v, want %v", got, tc.want)
					}
				})
			}
		})
	}
}

func mustCancel(t *testing.T, r *store.Reservation) {
	t.Helper()
	if err := r.Cancel(context.Background()); err != nil {
		t.Fatalf("cancel: %v", err)
	}
}

// undoEpoch is the fake clocks' start.
var undoEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// errDown is the error of every call to downStore.
var errDown = errors.New("down: connection refused")

// downStore is a shared store that never answers: the outage store around
// it serves every request from its local buckets.
type downStore struct{}

func (downStore) Reserve(context.Context, []store.Bucket, time.Duration) (store.Reservation, error) {
	return store.Reservation{}, errDown
}
func (downStore) Pause(context.Context, []store.Bucket, time.Duration) error { return errDown }
func (downStore) Limit(context.Context, store.Bucket, store.Cap) (store.Stretch, error) {
	return store.Stretch{}, errDown
}
func (downStore) Held(context.Context, []store.Bucket) (time.Duration, error) {
	return 0, errDown
}
