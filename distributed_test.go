package throttle

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
)

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
	live := func(tr *Transport) int64 { return tr.store.(*outage.Store).Primary().(*redisstore.Store).FleetSize() }
	counted := func(tr *Transport) int64 {
		return tr.store.(*outage.Store).Primary().(*redisstore.Store).Counted()
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
			if since > redisstore.HeartbeatTTL+3*redisstore.HeartbeatEvery {
				t.Fatalf("the stopped replica still counts %v after its last beat (TTL %v)", since, redisstore.HeartbeatTTL)
			}
			continue
		}
		// Its last beat was at most one interval before it stopped, and
		// a count is at most one interval old.
		if since < redisstore.HeartbeatTTL-redisstore.HeartbeatEvery {
			t.Fatalf("the stopped replica dropped out %v after it stopped, before its TTL (%v)", since, redisstore.HeartbeatTTL)
		}
		if n0 == 2 && n1 == 2 {
			t.Logf("the stopped replica dropped out of both counts %v after it stopped (TTL %v)", since.Round(time.Millisecond), redisstore.HeartbeatTTL)
			return
		}
	}
}
