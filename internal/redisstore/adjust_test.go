package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// TestRedisAdjust runs adjust.lua at explicit times through the cases of
// internal/localstore's TestGCRAAdjust, in µs: a charge books from now or
// the queue's end, a refund shortens the queue but never past now. The cap
// and hold a bucket holds stay.
func TestRedisAdjust(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	now := int64(1_700_000_000_000_000)
	s := New(rdb, Options{Namespace: testNamespace(t), NowMicros: func() int64 { return now }})
	b := store.Bucket{Key: "pts", Rule: "pts", Interval: 10 * time.Microsecond, Burst: 5, Cost: 5}
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
	// A bucket with room: the charge books from now.
	if err := s.Adjust(ctx, b, 3); err != nil {
		t.Fatal(err)
	}
	if got := tat(); got != now+30 {
		t.Fatalf("charge of a new bucket: TAT %d, want now+30", got-now)
	}
	for _, tc := range []struct {
		delta, want int64 // want: the TAT after, from now
	}{
		{2, 50}, {-2, 30}, {-9, 0},
	} {
		if err := s.Adjust(ctx, b, tc.delta); err != nil {
			t.Fatal(err)
		}
		if got := tat() - now; got != tc.want {
			t.Errorf("adjust %+d: TAT now%+d, want now%+d", tc.delta, got, tc.want)
		}
	}
	// A refund on a bucket with room changes nothing.
	now += 1000
	if err := s.Adjust(ctx, b, -3); err != nil {
		t.Fatal(err)
	}
	if got := tat(); got != now-1000 {
		t.Errorf("refund with room: TAT moved to %d", got)
	}
	// A pause and a cap survive an adjustment.
	if err := s.Pause(ctx, []store.Bucket{b}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Adjust(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	held, err := s.Held(ctx, []store.Bucket{b})
	if err != nil || held != time.Second {
		t.Errorf("held %v (%v) after an adjustment, want 1s", held, err)
	}
}
