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
	stop := s.Watch(Listener{Pause: func(keys []string, d time.Duration) { ch <- heard{keys, d} }})
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
	stop := s.Watch(Listener{})
	stop()
	stop()

	srv.Kill()
	s = New(srv.Client(t), Options{Namespace: testNamespace(t)})
	stop = s.Watch(Listener{})
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not return with Redis down")
	}
}

type heardStretch struct {
	keys  []string
	from  time.Duration
	ratio float64
}

// TestRedisStretchPublished: a cap that retimes (store.Cap.Retime) and
// slows a bucket with slots booked ahead returns the stretch it made
// (store.Stretch: from the store's now, the new interval over the old)
// and publishes it, and every other store
// of the namespace hears it, with the bucket's key, its start and its
// ratio; the store that made it does not (its caller re-times its own
// waiters). A cap that leaves the interval as it is, one that does not
// retime and a raise tell nothing, and a stretch message that names no
// ratio other than 1 is ignored.
func TestRedisStretchPublished(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ns := testNamespace(t)
	// a's scripts run at a fixed now, so that the stretch's figures are
	// exact.
	now := time.Now().UnixMicro()
	a := New(rdb, Options{Namespace: ns, NowMicros: func() int64 { return now }})
	b := New(rdb, Options{Namespace: ns})
	listen := func(s *Store) <-chan heardStretch {
		ch := make(chan heardStretch, 8)
		stop := s.Watch(Listener{Stretch: func(keys []string, from time.Duration, ratio float64) { ch <- heardStretch{keys, from, ratio} }})
		t.Cleanup(stop)
		return ch
	}
	fromA, fromB := listen(a), listen(b)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := rdb.PubSubNumSub(redisCtx(t), a.pauseChannel()).Result()
		if err == nil && n[a.pauseChannel()] >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscriptions never came")
		}
	}
	ctx := redisCtx(t)
	for _, m := range []string{`{"r":1,"k":["api"],"o":"x"}`, `{"r":3,"k":[],"o":"x"}`} {
		if err := rdb.Publish(ctx, a.pauseChannel(), m).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// 20 slots of 10 ms: 200 ms booked ahead.
	bk := store.Bucket{Key: "api", Rule: "api", Interval: 10 * time.Millisecond, Burst: 1, Cost: 1}
	for range 20 {
		if r, err := a.Reserve(ctx, []store.Bucket{bk}, time.Second); err != nil || !r.OK {
			t.Fatalf("reserve: %+v, %v", r, err)
		}
	}
	if st, err := a.Limit(ctx, bk, store.Cap{Rate: 200, Span: time.Second}); err != nil || st != (store.Stretch{}) {
		t.Fatalf("a cap above the rule: %+v, %v; want no stretch", st, err)
	}
	st, err := a.Limit(ctx, bk, store.Cap{Rate: 50, Span: time.Second, Retime: true})
	if err != nil || st.Ratio != 2 || st.From != 0 {
		t.Fatalf("a cut to 50/s of a 100/s bucket: %+v, %v; want ratio 2 from now", st, err)
	}
	select {
	case h := <-fromB:
		if !slices.Equal(h.keys, []string{"api"}) || h.ratio != 2 || h.from != 0 {
			t.Errorf("b heard %+v, want [api] stretched 2 from now", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b never heard of the stretch")
	}
	select {
	case h := <-fromA:
		t.Errorf("a heard its own stretch: %+v", h)
	case h := <-fromB:
		t.Errorf("b heard more than the stretch: %+v", h)
	case <-time.After(100 * time.Millisecond):
	}
	// The bucket's next slot is where the stretched lead ends: 400 ms
	// ahead, the 200 ms booked at 10 ms a slot stretched to 20.
	r, err := a.Reserve(ctx, []store.Bucket{bk}, time.Second)
	if err != nil || !r.OK || r.Wait != 400*time.Millisecond {
		t.Errorf("after the stretch: %+v, %v; want a wait of 400ms", r, err)
	}
	// A cut that does not retime leaves the booked slots where they are
	// and tells no one; nor does a raise.
	if st, err := a.Limit(ctx, bk, store.Cap{Rate: 25, Span: time.Second}); err != nil || st != (store.Stretch{}) {
		t.Errorf("a cut without Retime: %+v, %v; want no stretch told", st, err)
	}
	// The next slot ends the 420 ms booked; the one after comes 40 ms on.
	if r, err := a.Reserve(ctx, []store.Bucket{bk}, 2*time.Second); err != nil || !r.OK || r.Wait != 420*time.Millisecond {
		t.Errorf("after the cut without Retime: %+v, %v; want a wait of 420ms", r, err)
	}
	if r, err := a.Reserve(ctx, []store.Bucket{bk}, 2*time.Second); err != nil || !r.OK || r.Wait != 460*time.Millisecond {
		t.Errorf("the second booking after the cut without Retime: %+v, %v; want a wait of 460ms", r, err)
	}
	if st, err := a.Limit(ctx, bk, store.Cap{Span: time.Second, Retime: true}); err != nil || st != (store.Stretch{}) {
		t.Errorf("a raise: %+v, %v; want no stretch", st, err)
	}
	select {
	case h := <-fromB:
		t.Errorf("b heard %+v of a cap that told nothing", h)
	case <-time.After(100 * time.Millisecond):
	}
}
