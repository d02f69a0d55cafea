package lease_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/redistest"
)

// phases of the outage test.
const (
	phaseUp = iota
	phaseDown
	phaseReturn // the first 2 s after Redis is back
	phaseBack   // after that
	phases
)

// TestRedisOutageFallback: a fleet of 4 replicas runs 32 workers against a
// cap of 20 (or 10). Redis is killed for 2 s and restarted empty, or paused
// (SIGSTOP) for 2 s and resumed. No Acquire fails; while Redis is down the
// fleet stays within 110 % of the cap; every replica is back on Redis, and
// the fleet on the shared cap, within 2 s of Redis's return.
func TestRedisOutageFallback(t *testing.T) {
	for _, o := range []struct {
		name       string
		limit      int
		stop, back func(*redistest.Server)
	}{
		{"kill", 20, (*redistest.Server).Kill, (*redistest.Server).Restart},
		{"pause", 20, (*redistest.Server).Pause, (*redistest.Server).Resume},
		// ceil(10/4) = 3 a replica would be 12 of 10: the shares are floored.
		{"kill, cap 10", 10, (*redistest.Server).Kill, (*redistest.Server).Restart},
	} {
		t.Run(o.name, func(t *testing.T) { testOutage(t, o.limit, o.stop, o.back) })
	}
}

func testOutage(t *testing.T, limit int, stop, back func(*redistest.Server)) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	const (
		replicas = 4
		workers  = 8 // per replica
	)
	caps := []lease.Cap{{Key: "acct", Rule: "twilio", Limit: limit}}
	capN := int64(limit)
	var fleet []*lease.Fallback
	for range replicas {
		opt := srv.Options()
		opt.DialTimeout = 100 * time.Millisecond
		rdb := srv.ClientWith(t, opt)
		r := newStore(t, rdb, lease.WithNamespace(ns), lease.WithCallTimeout(200*time.Millisecond), lease.WithTTL(3*time.Second))
		fleet = append(fleet, lease.NewFallback(r, func() int { return replicas }))
	}

	var phase atomic.Int32
	var inFlight atomic.Int64
	var peak [phases]atomic.Int64
	var grants [phases]atomic.Int64
	var lastOver atomic.Int64 // UnixNano of the last grant over the cap
	var failures atomic.Int64
	var firstErr atomic.Value
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range fleet {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
				for {
					select {
					case <-done:
						return
					default:
					}
					l, err := f.Acquire(context.Background(), caps, lease.Normal, 30*time.Second)
					if err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err)
						continue
					}
					ph := phase.Load()
					n := inFlight.Add(1)
					grants[ph].Add(1)
					if n > capN {
						lastOver.Store(time.Now().UnixNano())
					}
					for {
						p := peak[ph].Load()
						if n <= p || peak[ph].CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(time.Duration(10+rng.IntN(20)) * time.Millisecond)
					inFlight.Add(-1)
					l.Release()
				}
			}()
		}
	}
	time.Sleep(time.Second)
	stop(srv)
	phase.Store(phaseDown)
	time.Sleep(2 * time.Second)
	downSeen := 0
	for _, f := range fleet {
		if f.Down() {
			downSeen++
		}
	}
	back(srv)
	returned := time.Now()
	phase.Store(phaseReturn)
	waitFor(t, "every replica back on Redis", func() bool {
		for _, f := range fleet {
			if f.Down() {
				return false
			}
		}
		return true
	})
	allBack := time.Since(returned)
	time.Sleep(2*time.Second - allBack)
	phase.Store(phaseBack)
	time.Sleep(time.Second)
	close(done)
	wg.Wait()

	overEnd := "never over the cap after the return"
	if lo := lastOver.Load(); lo > returned.UnixNano() {
		overEnd = "last over the cap " + time.Duration(lo-returned.UnixNano()).String() + " after the return"
	}
	t.Logf("%s", overEnd)
	t.Logf("peak in flight (cap %d): up %d, down %d, first 2 s after return %d, after %d; grants %d/%d/%d/%d; replicas down at the end of the outage %d/%d; all back on Redis %v after its return",
		limit, peak[phaseUp].Load(), peak[phaseDown].Load(), peak[phaseReturn].Load(), peak[phaseBack].Load(),
		grants[phaseUp].Load(), grants[phaseDown].Load(), grants[phaseReturn].Load(), grants[phaseBack].Load(),
		downSeen, replicas, allBack)
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d Acquire calls failed, the first: %v", n, firstErr.Load())
	}
	if downSeen != replicas {
		t.Fatalf("%d of %d replicas noticed the outage", downSeen, replicas)
	}
	if p := peak[phaseUp].Load(); p > capN {
		t.Fatalf("peak %d before the outage, over the cap %d", p, limit)
	}
	if p := peak[phaseDown].Load(); p > capN*11/10 {
		t.Fatalf("peak %d while Redis was down, over 110%% of %d", p, limit)
	}
	if allBack > 2*time.Second {
		t.Fatalf("replicas back on Redis %v after its return, want within 2 s", allBack)
	}
	if lo := lastOver.Load(); lo > returned.Add(2*time.Second).UnixNano() {
		t.Fatalf("over the cap %v after the return, want back on the shared cap within 2 s", time.Duration(lo-returned.UnixNano()))
	}
	if p := peak[phaseReturn].Load(); p > capN*11/10 {
		t.Fatalf("peak %d in the 2 s after the return, over 110%% of %d", p, limit)
	}
	if p := peak[phaseBack].Load(); p > capN {
		t.Fatalf("peak %d from 2 s after the return, over the shared cap %d", p, limit)
	}
	if grants[phaseDown].Load() == 0 || grants[phaseBack].Load() == 0 {
		t.Fatal("no progress in some phase")
	}
}

// TestFallbackShare: with Redis down from the start, the local semaphore
// admits ceil(Limit / live) per replica, or floor(Limit / live) when the
// ceiling would let the fleet pass 110 % of the Limit, at least 1; with
// live unknown (0), the WithFleetSize default stands for live; with
// neither, the whole Limit.
func TestFallbackShare(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.Kill()
	for _, tc := range []struct {
		name  string
		limit int
		live  int
		fleet int
		want  int
	}{
		{"even", 10, 5, 0, 2},
		{"ceil within 110 %", 20, 3, 0, 7},  // 3 × 7 = 21 ≤ 22
		{"floored past 110 %", 10, 3, 0, 3}, // ceil 4: 3 × 4 = 12 > 11
		{"floored past 110 %, four", 10, 4, 0, 2},
		{"one replica", 10, 1, 0, 10},
		{"more replicas than limit", 10, 20, 0, 1},
		{"unknown live, fleet size", 10, 0, 4, 2},
		{"unknown live, no fleet size", 10, 0, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := srv.Options()
			opt.Addr = addr
			r := newStore(t, srv.ClientWith(t, opt), lease.WithNamespace(uniqueNS(t)), lease.WithCallTimeout(100*time.Millisecond))
			f := lease.NewFallback(r, func() int { return tc.live }, lease.WithFleetSize(tc.fleet))
			caps := []lease.Cap{{Key: "k", Rule: "r", Limit: tc.limit}}
			var held []*lease.Lease
			for i := range tc.want {
				l, err := f.Acquire(context.Background(), caps, lease.Normal, 0)
				if err != nil {
					t.Fatalf("lease %d of %d: %v", i+1, tc.want, err)
				}
				held = append(held, l)
			}
			_, err := f.Acquire(context.Background(), caps, lease.Normal, 0)
			if !errorsAs(err, new(*lease.TimeoutError)) {
				t.Fatalf("lease %d: err %v, want a TimeoutError", tc.want+1, err)
			}
			if !f.Down() {
				t.Fatal("the Fallback is not down")
			}
			for _, l := range held {
				l.Release()
			}
		})
	}
}

// TestFallbackShareKeepsLastCount: once live has counted the replicas, a
// later 0 (a heartbeat that distrusts its count after Redis restarted
// empty) keeps the share of that count, not the WithFleetSize default:
// 12 / 4 replicas = 3, where the default of 10 would give 1.
func TestFallbackShareKeepsLastCount(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.Kill()
	opt := srv.Options()
	opt.Addr = addr
	r := newStore(t, srv.ClientWith(t, opt), lease.WithNamespace(uniqueNS(t)), lease.WithCallTimeout(100*time.Millisecond))
	var live atomic.Int64
	live.Store(4)
	f := lease.NewFallback(r, func() int { return int(live.Load()) }, lease.WithFleetSize(10))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 12}}
	l, err := f.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	live.Store(0)
	var held []*lease.Lease
	for i := range 3 {
		l, err := f.Acquire(context.Background(), caps, lease.Normal, 0)
		if err != nil {
			t.Fatalf("lease %d of 3: %v", i+1, err)
		}
		held = append(held, l)
	}
	if _, err := f.Acquire(context.Background(), caps, lease.Normal, 0); !errorsAs(err, new(*lease.TimeoutError)) {
		t.Fatalf("lease 4: err %v, want a TimeoutError", err)
	}
	for _, l := range held {
		l.Release()
	}
}
