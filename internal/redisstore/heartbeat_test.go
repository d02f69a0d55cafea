package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

func TestHeartbeatCountsLiveReplicas(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	const prefix = "throttle:{hb}:"
	a, b, c := newHeartbeat(prefix, systemClock{}), newHeartbeat(prefix, systemClock{}), newHeartbeat(prefix, systemClock{})
	ttl := Micros(a.ttl)
	now := int64(1_900_000_000_000_000) // µs; explicit so TTLs pass on demand

	beat := func(h *heartbeat, at int64, want int64) {
		t.Helper()
		n, err := h.beat(ctx, rdb, at)
		if err != nil {
			t.Fatal(err)
		}
		if n != want || h.live.Load() != want {
			t.Fatalf("beat at +%dµs: count %d (recorded %d), want %d", at-now, n, h.live.Load(), want)
		}
	}
	if a.size() != 0 {
		t.Fatalf("size before any beat = %d, want 0", a.size())
	}
	beat(a, now, 1)
	beat(b, now, 2)
	beat(c, now, 3)
	beat(a, now, 3) // a beat again: still one member

	// c dies. a and b keep beating; c counts until its TTL has passed.
	beat(a, now+ttl-1, 3)
	beat(b, now+ttl-1, 3)
	beat(a, now+ttl, 2)
	beat(b, now+ttl+1, 2)

	// The set expires on its own once everyone is gone.
	pttl, err := rdb.PTTL(ctx, a.key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > a.ttl+time.Second {
		t.Fatalf("replica set PTTL = %v, want within (0, TTL+1s]", pttl)
	}
}

func TestHeartbeatSurvivesRestartAndScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	h := newHeartbeat("throttle:{hb2}:", systemClock{})
	if _, err := h.beat(ctx, rdb, ""); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.beat(ctx, rdb, ""); err != nil || n != 1 {
		t.Fatalf("after SCRIPT FLUSH: %d, %v", n, err)
	}
	srv.Restart()
	// The first call may meet the connection the restart broke; go-redis
	// retries it. The script cache and the set are empty: EVALSHA falls
	// back to EVAL and the replica registers afresh.
	if n, err := h.beat(ctx, rdb, ""); err != nil || n != 1 {
		t.Fatalf("after restart: %d, %v", n, err)
	}
}

// TestHeartbeatSizeSettles checks which counts size trusts: none until a
// count recorded an interval after the run's first (the first, or the last
// that dropped), unless the count already reaches DefaultFleetSize.
func TestHeartbeatSizeSettles(t *testing.T) {
	const young, every = HeartbeatYoungEvery, HeartbeatEvery
	type beat struct {
		after time.Duration // since the previous count
		n     int64
	}
	for _, tc := range []struct {
		name  string
		beats []beat
		want  int64
	}{
		{"no beat", nil, 0},
		{"first beat of a starting fleet", []beat{{0, 1}}, 0},
		{"first beat below the default", []beat{{0, store.DefaultFleetSize - 1}}, 0},
		{"first beat at the default", []beat{{0, store.DefaultFleetSize}}, store.DefaultFleetSize},
		{"first beat above the default", []beat{{0, 40}}, 40},
		{"young beats within the interval", []beat{{0, 1}, {young, 3}, {young, 4}}, 0},
		{"a beat an interval after the first", []beat{{0, 1}, {every, 4}}, 4},
		{"young beats reaching the interval", []beat{{0, 1}, {every / 2, 3}, {every / 2, 4}}, 4},
		// A drop may be a restarted Redis re-counting from 1: it is
		// trusted again an interval after the drop.
		{"a count that drops", []beat{{0, 4}, {every, 4}, {every, 2}}, 0},
		{"a shrinking fleet, an interval on", []beat{{0, 4}, {every, 4}, {every, 2}, {every, 2}}, 2},
		{"a restarted Redis re-counting", []beat{{0, 4}, {every, 4}, {every, 1}, {young, 2}}, 0},
		{"a restarted Redis, an interval on", []beat{{0, 4}, {every, 4}, {every, 1}, {young, 2}, {every - young, 3}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(fbEpoch)
			h := newHeartbeat("throttle:{x}:", clk)
			for _, b := range tc.beats {
				clk.Advance(b.after)
				h.record(b.n)
			}
			if got := h.size(); got != tc.want {
				t.Fatalf("size() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHeartbeatDueOncePerInterval checks the beats' pace: one caller per
// HeartbeatYoungEvery until the count settles, then one per interval.
func TestHeartbeatDueOncePerInterval(t *testing.T) {
	clk := fakeclock.New(fbEpoch)
	h := newHeartbeat("throttle:{x}:", clk)
	if !h.due() {
		t.Fatal("first beat not due")
	}
	if h.due() {
		t.Fatal("due twice at once")
	}
	h.record(1)
	clk.Advance(HeartbeatYoungEvery - 1)
	if h.due() {
		t.Fatal("due before the young interval")
	}
	clk.Advance(1)
	if !h.due() {
		t.Fatal("not due after the young interval while the count settles")
	}
	clk.Advance(h.every - HeartbeatYoungEvery)
	if !h.due() {
		t.Fatal("not due")
	}
	h.record(2)
	if h.size() != 2 {
		t.Fatalf("size() = %d after a count an interval on, want 2", h.size())
	}
	// The beat that settled it was scheduled the young interval on;
	// from the next, one per interval.
	clk.Advance(HeartbeatYoungEvery)
	if !h.due() {
		t.Fatal("the beat scheduled before the count settled is not due")
	}
	clk.Advance(HeartbeatYoungEvery)
	if h.due() {
		t.Fatal("due at the young interval after the count settled")
	}
	clk.Advance(h.every - HeartbeatYoungEvery)
	if !h.due() {
		t.Fatal("not due after the interval")
	}
	if newHeartbeat("p", clk).id == h.id {
		t.Fatal("two replicas drew the same id")
	}
}
