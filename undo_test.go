package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
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
			f := redisOutageStore(redisSettings{rdb: rdb, namespace: testNamespace(t), outage: defaultOutageSettings()}, clk)
			f.primary.(*ZStore).nowMicros = func() int64 { return clk.Now().UnixMicro() }
			return f
		},
		"outage store, fallback (local buckets)": func(t *testing.T, clk *fakeclock.Clock) store.Store {
			primary := &flakyStore{inner: newLocalStore(clk), failing: true}
			os := defaultOutageSettings()
			os.share = 1 // the local buckets run the whole rule
			f := newOutageStore(primary, os, clk, outageWiring{})
			if _, err := f.Reserve(context.Background(), []store.Bucket{{Key: "trip", Rule: "trip", Interval: time.Millisecond, Burst: 1, Cost: 1}}, 0); err != nil {
				t.Fatal(err)
			}
			if f.mode() != ModeFallback {
				t.Fatalf("mode %v, want fallback", f.mode())
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
					clk := fakeclock.New(fbEpoch)
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

// TestRedisStoreTimeout: with Redis stopped (SIGSTOP), every call of the
// Redis store returns within its timeout (WithRedisTimeout), marked as
// errRedisTimeout, though the caller's context has no deadline. Reserve
// keeps it with a client that ignores deadlines too (the batcher's guard);
// the other calls need a client that honours them (the outage store guards
// them otherwise).
func TestRedisStoreTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	bound := timeout + 400*time.Millisecond // the machine is shared, and -race
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name     string
		ctxAware bool
		ops      []string
	}{
		{"ContextTimeoutEnabled", true, []string{"reserve", "cancel", "pause", "limit", "held"}},
		{"client ignores deadlines", false, []string{"reserve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := srv.Options()
			opt.ContextTimeoutEnabled = tc.ctxAware
			opt.MaxRetries = -1
			rdb := srv.ClientWith(t, opt)
			rt := store.NewTimeout(timeout)
			rt.MarkWarm() // not the cold bound of a first call
			s := ZNew(rdb, ZOptions{Namespace: testNamespace(t), Timeout: rt, Guard: !tc.ctxAware})
			ctx := context.Background()
			b := undoBucket
			r, err := s.Reserve(ctx, []store.Bucket{b}, time.Hour)
			if err != nil || !r.OK {
				t.Fatalf("reserve before the stall: %+v, %v", r, err)
			}
			srv.Pause()
			for _, op := range tc.ops {
				start := time.Now()
				switch op {
				case "reserve":
					_, err = s.Reserve(ctx, []store.Bucket{b}, time.Hour)
				case "cancel":
					err = r.Cancel(ctx)
				case "pause":
					err = s.Pause(ctx, []store.Bucket{b}, time.Second)
				case "limit":
					err = s.Limit(ctx, b, store.Cap{Rate: 1, Span: time.Second})
				case "held":
					_, err = s.Held(ctx, []store.Bucket{b})
				}
				took := time.Since(start)
				if !errors.Is(err, store.ErrTimeout) {
					t.Errorf("%s: err %v, want errRedisTimeout", op, err)
				}
				if took > bound {
					t.Errorf("%s took %v against a stalled Redis, timeout %v", op, took, timeout)
				}
			}
			srv.Resume()
		})
	}
}
