package algorithm_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// TestRedisWindowKeysExpire checks, on Redis's own clock, that every key a
// window bucket writes (its counts or log, and its envelope after a pause
// and a cap) carries a TTL just past its useful life and is gone soon
// after.
func TestRedisWindowKeysExpire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := redisCtx(t)
	s := redisstore.New(rdb, redisstore.Options{Namespace: "ttl"})
	const period = 200 * time.Millisecond
	var bs []store.Bucket
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingLog, store.SlidingCounter} {
		bs = append(bs, store.Bucket{Key: []string{"", "", "fw", "sl", "sc"}[alg], Rule: "w", Algorithm: alg, Burst: 5, Period: period, Interval: 40 * time.Millisecond, Cost: 2})
	}
	if r, err := s.Reserve(ctx, bs, time.Second); err != nil || !r.OK {
		t.Fatalf("reserve: %+v, %v", r, err)
	}
	if _, err := s.Limit(ctx, bs[0], store.Cap{Rate: 0, Span: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(ctx, bs[1:2], 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keys := []string{"throttle:{ttl}:fw", "throttle:{ttl}:sl", "throttle:{ttl}:sc", "throttle:e:{ttl}:fw", "throttle:e:{ttl}:sl"}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// At most: the bucket's last window (two for the sliding counter;
		// two after the pause for an envelope) and a second.
		if ttl <= 0 || ttl > 2*period+100*time.Millisecond+time.Second {
			t.Fatalf("PTTL %s = %v, want in (0, %v]", k, ttl, 2*period+100*time.Millisecond+time.Second)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.Exists(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the keys still exist 10s later", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisWindowBucketsConcurrent books window buckets from many
// goroutines at once, so that the store's batcher sends them together
// (reserve_batch.lua), on Redis's clock: exactly the quota is admitted.
func TestRedisWindowBucketsConcurrent(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := redisCtx(t)
	s := redisstore.New(rdb, redisstore.Options{Namespace: "concurrent"})
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingLog, store.SlidingCounter} {
		b := store.Bucket{Key: []string{"", "", "fw", "sl", "sc"}[alg], Rule: "w", Algorithm: alg, Burst: 50, Period: time.Hour, Interval: 72 * time.Second, Cost: 1}
		var wg sync.WaitGroup
		var ok atomic.Int64
		errs := make(chan error, 32)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					r, err := s.Reserve(ctx, []store.Bucket{b}, 0)
					if err != nil {
						errs <- err
						return
					}
					if r.OK {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// A fixed window at an hour's boundary could admit a second
		// quota; the test is over in well under a second.
		if n := ok.Load(); n != 50 && (alg != store.FixedWindow || n != 100) {
			t.Fatalf("%v: %d of 320 admitted, want the quota of 50", alg, n)
		}
	}
}
