package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/redistest"
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
		{"first beat below the default", []int64{DefaultFleetSize - 1}, 0},
		{"first beat at the default", []int64{DefaultFleetSize}, DefaultFleetSize},
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

// TestHeartbeatRidesOnReserve runs three Transports (three replicas) on one
// namespace: every request costs exactly one script call, the heartbeats
// ride in them (one ZADD per replica per interval at most), each replica
// learns the live count, and a replica that stops (as a dead one does)
// stops counting once its TTL has passed, not before.
func TestHeartbeatRidesOnReserve(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	ns := testNamespace(t)
	rule := Rule{Name: "r", Limit: Limit{Rate: 1000, Period: time.Second, Burst: 1000}}
	trs := make([]*Transport, 3)
	for i := range trs {
		// A timeout far above any stall of a loaded machine: this test
		// is about the heartbeat, not the fallback.
		trs[i] = mustNew(t, okBase, WithRedis(rdb), WithNamespace(ns), WithRules(rule), WithRedisTimeout(redisTestTimeout))
	}
	send := func(tr *Transport) {
		t.Helper()
		if err := roundTrip(tr, newReq(t, ctx, http.MethodGet, "http://example.com/")); err != nil {
			t.Fatal(err)
		}
	}
	live := func(tr *Transport) int64 { return tr.store.(*outageStore).fleet() }
	counted := func(tr *Transport) int64 {
		return tr.store.(*outageStore).primary.(*ZStore).hb.live.Load()
	}

	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i, tr := range trs {
		send(tr) // its first request beats: the count includes it
		if got := counted(tr); got != int64(i+1) {
			t.Fatalf("replica %d counts %d live replicas, want %d", i, got, i+1)
		}
	}
	const more = 10
	for range more {
		for _, tr := range trs {
			send(tr)
		}
	}
	calls := commandStats(t, ctx, rdb)
	requests := len(trs) * (1 + more)
	// One EVALSHA per request; the first one met an empty script cache
	// and was followed by one EVAL.
	if calls["evalsha"] != requests || calls["eval"] > 1 {
		t.Errorf("%d EVALSHA and %d EVAL for %d requests (commandstats %v)", calls["evalsha"], calls["eval"], requests, calls)
	}
	// The requests above took well under a second on any machine, but a
	// slow one may have let a second beat fall due.
	if z := calls["zadd"]; z < len(trs) || z > 2*len(trs) {
		t.Errorf("%d beats (ZADD) for %d replicas within about a second", z, len(trs))
	}
	for _, tr := range trs {
		if m := tr.Mode(); m != ModeShared {
			t.Fatalf("mode %v", m)
		}
	}

	// Replicas 0 and 1 counted only those before them at their first
	// beat, and the fallback trusts no count before the second: all three
	// send until the next beats have counted everyone.
	if n := live(trs[2]); n != 0 {
		t.Fatalf("fleet size %d after one beat, want 0 (unknown)", n)
	}
	for deadline := time.Now().Add(10 * time.Second); live(trs[0]) != 3 || live(trs[1]) != 3; {
		if time.Now().After(deadline) {
			t.Fatalf("counts %d, %d after 10 s, want 3", live(trs[0]), live(trs[1]))
		}
		time.Sleep(100 * time.Millisecond)
		for _, tr := range trs {
			send(tr)
		}
	}

	// Replica 2 stops. The others keep sending: it keeps counting until
	// its TTL has passed, then drops out.
	stopped := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		send(trs[0])
		send(trs[1])
		n0, n1 := live(trs[0]), live(trs[1])
		since := time.Since(stopped)
		if n0 == 3 && n1 == 3 {
			if since > heartbeatTTL+3*heartbeatEvery {
				t.Fatalf("the stopped replica still counts %v after its last beat (TTL %v)", since, heartbeatTTL)
			}
			continue
		}
		// Its last beat was at most one interval before it stopped, and
		// a count is at most one interval old.
		if since < heartbeatTTL-heartbeatEvery {
			t.Fatalf("the stopped replica dropped out %v after it stopped, before its TTL (%v)", since, heartbeatTTL)
		}
		if n0 == 2 && n1 == 2 {
			t.Logf("the stopped replica dropped out of both counts %v after it stopped (TTL %v)", since.Round(time.Millisecond), heartbeatTTL)
			return
		}
	}
}
