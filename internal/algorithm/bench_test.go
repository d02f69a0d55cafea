package algorithm_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// wallClock is the real clock, for the benchmarks.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// benchBuckets are buckets of each algorithm that never make a request
// wait at the benchmarks' rates (a billion units a second), so every
// decision books.
var benchBuckets = []store.Bucket{
	{Key: "LeakyBucket", Rule: "LeakyBucket", Algorithm: store.LeakyBucket, Interval: time.Nanosecond, Burst: 1 << 20, Cost: 1, Lateness: time.Second},
	{Key: "TokenBucket", Rule: "TokenBucket", Algorithm: store.TokenBucket, Interval: time.Nanosecond, Burst: 1 << 20, Cost: 1, Lateness: time.Second},
	{Key: "FixedWindow", Rule: "FixedWindow", Algorithm: store.FixedWindow, Interval: time.Nanosecond, Burst: 1e9, Period: time.Second, Cost: 1},
	{Key: "SlidingLog", Rule: "SlidingLog", Algorithm: store.SlidingLog, Interval: time.Nanosecond, Burst: 1e9, Period: time.Second, Cost: 1},
	{Key: "SlidingCounter", Rule: "SlidingCounter", Algorithm: store.SlidingCounter, Interval: time.Nanosecond, Burst: 1e9, Period: time.Second, Cost: 1},
}

// BenchmarkDecision measures one decision (a booking) of each algorithm in
// the local store and in a private redis-server, one goroutine, side by
// side. Run with:
//
//	go test -run '^$' -bench Decision -benchmem ./internal/algorithm/
func BenchmarkDecision(b *testing.B) {
	ctx := context.Background()
	for _, bk := range benchBuckets {
		b.Run("local/"+bk.Key, func(b *testing.B) {
			s := localstore.New(wallClock{})
			bs := []store.Bucket{bk}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := s.Reserve(ctx, bs, 0); err != nil || !r.OK {
					b.Fatalf("%+v %v", r, err)
				}
			}
		})
	}
	rdb := redistest.Start(b).Client(b)
	for _, bk := range benchBuckets {
		b.Run("redis/"+bk.Key, func(b *testing.B) {
			s := redisstore.New(rdb, redisstore.Options{Namespace: "bench-" + strconv.Itoa(b.N)})
			bs := []store.Bucket{bk}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := s.Reserve(ctx, bs, 0); err != nil || !r.OK {
					b.Fatalf("%+v %v", r, err)
				}
			}
		})
	}
}

// costBuckets are buckets of each algorithm at a realistic quota, 100 a
// minute (a leaky or token bucket of 10 draining at that rate), for the
// memory and CPU each costs in Redis.
var costBuckets = []store.Bucket{
	{Key: "LeakyBucket", Rule: "LeakyBucket", Algorithm: store.LeakyBucket, Interval: 600 * time.Millisecond, Burst: 10, Lateness: 600 * time.Millisecond},
	{Key: "TokenBucket", Rule: "TokenBucket", Algorithm: store.TokenBucket, Interval: 600 * time.Millisecond, Burst: 10, Lateness: 600 * time.Millisecond},
	{Key: "FixedWindow", Rule: "FixedWindow", Algorithm: store.FixedWindow, Interval: 600 * time.Millisecond, Burst: 100, Period: time.Minute},
	{Key: "SlidingLog", Rule: "SlidingLog", Algorithm: store.SlidingLog, Interval: 600 * time.Millisecond, Burst: 100, Period: time.Minute},
	{Key: "SlidingCounter", Rule: "SlidingCounter", Algorithm: store.SlidingCounter, Interval: 600 * time.Millisecond, Burst: 100, Period: time.Minute},
}

// TestRedisCostPerAlgorithm measures, for each algorithm at 100 a minute,
// the MEMORY USAGE of its key at the quota (a sliding log then holds 100
// entries) and the server's CPU per decision (INFO commandstats'
// usec_per_call of EVALSHA: the whole script) over 2000 decisions at the
// quota's rate (a request every 600ms of the scripts' clock; some wait,
// none is refused), then for one request of all five buckets.
// docs/ALGORITHMS.md quotes its log.
func TestRedisCostPerAlgorithm(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	const decisions = 2000
	run := func(name string, bs []store.Bucket) {
		clk := fakeclock.New(time.Unix(1_700_000_000, 0))
		s := redisstore.New(rdb, redisstore.Options{Namespace: name, NowMicros: func() int64 { return clk.Now().UnixMicro() }})
		for i := range bs {
			bs[i].Cost = 1
		}
		// Fill to the quota first: 100 requests a minute for two minutes.
		for range 200 {
			if _, err := s.Reserve(ctx, bs, time.Minute); err != nil {
				t.Fatal(err)
			}
			clk.Advance(600 * time.Millisecond)
		}
		var mem int64
		for _, b := range bs {
			m, err := rdb.MemoryUsage(ctx, "throttle:{"+name+"}:"+b.Key).Result()
			if err != nil {
				t.Fatalf("MEMORY USAGE %s: %v", b.Key, err)
			}
			mem += m
		}
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		ok := 0
		for range decisions {
			r, err := s.Reserve(ctx, bs, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK {
				ok++
			}
			clk.Advance(600 * time.Millisecond)
		}
		usec, calls := evalshaStats(t, rdb)
		t.Logf("%-15s MEMORY USAGE %4d bytes; %.2f usec_per_call over %d EVALSHA (%d of %d booked)", name, mem, usec, calls, ok, decisions)
		if ok == 0 {
			t.Fatalf("%s: nothing booked", name)
		}
	}
	for _, b := range costBuckets {
		run(b.Key, []store.Bucket{b})
	}
	run("all-five", append([]store.Bucket(nil), costBuckets...))
}

// evalshaStats returns INFO commandstats' usec_per_call and calls of
// EVALSHA.
func evalshaStats(t *testing.T, rdb *redis.Client) (float64, int64) {
	t.Helper()
	info, err := rdb.Info(redisCtx(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		var usec float64
		var calls int64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		return usec, calls
	}
	t.Fatalf("no cmdstat_evalsha in %q", info)
	return 0, 0
}
