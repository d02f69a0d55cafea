package redisstore

import (
	"slices"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

type heard struct {
	keys []string
	d    time.Duration
}

// watch starts s's pause watch, handing what it hears to the channel it
// returns, and waits until the subscription is in place (a pause published
// before would be missed, which the buckets then tell instead).
func watch(t *testing.T, s *Store) <-chan heard {
	t.Helper()
	ch := make(chan heard, 8)
	stop := s.WatchPauses(func(keys []string, d time.Duration) { ch <- heard{keys, d} })
	t.Cleanup(stop)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := s.rdb.PubSubNumSub(redisCtx(t), s.pauseChannel()).Result()
		if err == nil && n[s.pauseChannel()] > 0 {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription never came")
		}
	}
}

// TestRedisPausePublished: a pause set through one store of a namespace is
// heard by every store of that namespace, the one that set it included,
// with its buckets' keys and its length, and by none of another namespace.
// A message that does not parse is ignored.
func TestRedisPausePublished(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ns := testNamespace(t)
	a := New(rdb, Options{Namespace: ns})
	b := New(rdb, Options{Namespace: ns})
	other := New(rdb, Options{Namespace: ns + "-other"})
	fromA, fromB, fromOther := watch(t, a), watch(t, b), watch(t, other)
	ctx := redisCtx(t)

	for _, m := range []string{"not json", `{"d":0,"k":["x"]}`, `{"d":5,"k":[]}`} {
		if err := rdb.Publish(ctx, b.pauseChannel(), m).Err(); err != nil {
			t.Fatal(err)
		}
	}
	bs := []store.Bucket{
		{Key: "api", Rule: "api", Interval: 10 * time.Millisecond, Burst: 1, Cost: 1},
		{Key: "api:writes", Rule: "writes", Interval: 100 * time.Millisecond, Burst: 2, Cost: 1},
	}
	if err := a.Pause(ctx, bs, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	for name, ch := range map[string]<-chan heard{"a": fromA, "b": fromB} {
		select {
		case h := <-ch:
			// The length left when the message left: the pause less the
			// script's round trip.
			if !slices.Equal(h.keys, []string{"api", "api:writes"}) || h.d > 1500*time.Millisecond || h.d < 1400*time.Millisecond {
				t.Errorf("%s heard %v for %v, want [api api:writes] for 1.5s less a round trip", name, h.keys, h.d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never heard of the pause", name)
		}
	}
	select {
	case h := <-fromOther:
		t.Errorf("another namespace heard %v", h)
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case h := <-fromB:
		t.Errorf("b heard more than the pause: %v", h)
	default:
	}
}

// TestRedisPauseWatchStops: stop returns at once, whether or not the
// subscription was made (Redis down: the dial is abandoned), and is
// idempotent; goleak (TestMain) checks that nothing is left running.
func TestRedisPauseWatchStops(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := New(srv.Client(t), Options{Namespace: testNamespace(t)})
	stop := s.WatchPauses(func([]string, time.Duration) {})
	stop()
	stop()

	srv.Kill()
	s = New(srv.Client(t), Options{Namespace: testNamespace(t)})
	stop = s.WatchPauses(func([]string, time.Duration) {})
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not return with Redis down")
	}
}
