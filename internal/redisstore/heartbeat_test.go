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

// TestHeartbeatSizeSettles checks which counts size trusts: none before a
// second beat, unless the first is already above DefaultFleetSize.
func TestHeartbeatSizeSettles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts []int64
		want   int64
	}{
		{"no beat", nil, 0},
		{"first beat of a starting fleet", []int64{1}, 0},
		{"first beat below the default", []int64{store.DefaultFleetSize - 1}, 0},
		{"first beat at the default", []int64{store.DefaultFleetSize}, store.DefaultFleetSize},
		{"first beat above the default", []int64{40}, 40},
		{"second beat", []int64{1, 4}, 4},
		// A drop may be a restarted Redis re-counting from 1: it is
		// trusted again from the next beat.
		{"a count that drops", []int64{4, 4, 2}, 0},
		{"a shrinking fleet, next beat", []int64{4, 4, 2, 2}, 2},
		{"a restarted Redis re-counting", []int64{4, 4, 1}, 0},
		{"a restarted Redis, next beat", []int64{4, 4, 1, 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeartbeat("throttle:{x}:", systemClock{})
			for _, n := range tc.counts {
				h.record(n)
			}
			if got := h.size(); got != tc.want {
				t.Fatalf("size() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestHeartbeatDueOncePerInterval(t *testing.T) {
	clk := fakeclock.New(fbEpoch)
	h := newHeartbeat("throttle:{x}:", clk)
	if !h.due() {
		t.Fatal("first beat not due")
	}
	if h.due() {
		t.Fatal("due twice at once")
	}
	clk.Advance(h.every - 1)
	if h.due() {
		t.Fatal("due before the interval")
	}
	clk.Advance(1)
	if !h.due() {
		t.Fatal("not due after the interval")
	}
	if newHeartbeat("p", clk).id == h.id {
		t.Fatal("two replicas drew the same id")
	}
}
