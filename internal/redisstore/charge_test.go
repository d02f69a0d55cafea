package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// TestRedisCharge runs charge.lua at explicit times through the cases of
// internal/localstore's TestGCRACharge, in µs, and checks that a bucket's
// pause survives a charge.
func TestRedisCharge(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	now := int64(1_700_000_000_000_000)
	s := New(rdb, Options{Namespace: testNamespace(t), NowMicros: func() int64 { return now }})
	b := store.Bucket{Key: "pts", Rule: "pts", Interval: 10 * time.Microsecond, Burst: 2, Cost: 2}
	key := "throttle:{" + testNamespace(t) + "}:pts"
	tat := func() int64 {
		t.Helper()
		v, err := rdb.Get(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		return n
	}
	if err := s.Charge(ctx, b, 3, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 30 {
		t.Fatalf("charge of a new bucket: TAT now%+d, want now+30", got)
	}
	if err := s.Charge(ctx, b, 2, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 50 {
		t.Errorf("charge of a queue: TAT now%+d, want now+50", got)
	}
	if err := s.Charge(ctx, b, -3, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 50 {
		t.Errorf("refund of a bucket with requests booked ahead (TAT beyond a burst): TAT now%+d, want now+50", got)
	}
	now += 35 // TAT now+15: within a burst (2 × 10 µs), nothing booked ahead
	if err := s.Charge(ctx, b, -1, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 5 {
		t.Errorf("refund: TAT now%+d, want now+5", got)
	}
	if err := s.Charge(ctx, b, -9, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 0 {
		t.Errorf("refund past now: TAT now%+d, want now", got)
	}
	now += 1000
	if err := s.Charge(ctx, b, -1, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != -1000 {
		t.Errorf("refund of a bucket with room: TAT now%+d, want unchanged", got)
	}
	if err := s.Charge(ctx, b, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := tat() - now; got != 10 {
		t.Errorf("charge after the queue drained: TAT now%+d, want now+10", got)
	}
	if err := s.Pause(ctx, []store.Bucket{b}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Charge(ctx, b, 1, 0); err != nil {
		t.Fatal(err)
	}
	held, err := s.Held(ctx, []store.Bucket{b})
	if err != nil || held != time.Second {
		t.Errorf("held %v (%v) after a charge, want 1s", held, err)
	}
}
