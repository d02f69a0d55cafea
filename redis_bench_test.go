package throttle

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/redistest"
)

// BenchmarkRedis compares, against one private redis-server in one run, the
// cost of one acquire through the Redis store, and through a whole
// Transport, with redis_rate's Allow and a raw EVALSHA of "return 1", the
// floor of any one-round-trip-per-call design. The bucket never makes
// anyone wait (a huge rate). With 64 goroutines the store's calls share
// round trips and script calls (batch.go); the others make one of each per
// call. Run with:
//
//	go test -run '^$' -bench 'Redis' -benchmem -count 5 .
func BenchmarkRedis(b *testing.B) {
	for _, o := range redisBenchOps(b) {
		for _, par := range []int{1, 64} {
			b.Run(o.name+"/goroutines="+strconv.Itoa(par), func(b *testing.B) {
				b.ReportAllocs()
				if par == 1 {
					for b.Loop() {
						if err := o.op(); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				b.SetParallelism(max(par/runtime.GOMAXPROCS(0), 1))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := o.op(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// redisBenchOp is one way to acquire a slot through Redis.
type redisBenchOp struct {
	name string
	op   func() error
}

// redisBenchOps starts a private redis-server and returns the variants
// BenchmarkRedis and BenchmarkRedisInterleaved compare, each loaded and
// connected: the floor, redis_rate, the Redis store, and whole Transports.
// The buckets never make anyone wait (huge rates).
func redisBenchOps(b *testing.B) []redisBenchOp {
	srv := redistest.Start(b)
	opt := srv.Options()
	opt.PoolSize = 128
	rdb := srv.ClientWith(b, opt)
	ctx := context.Background()

	s := newRedisStore(redisSettings{rdb: rdb, namespace: "bench"})
	bs := []bucket{{key: "bench-rule", rule: "bench-rule", interval: time.Microsecond, burst: 1 << 20, cost: 1}}

	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: 1 << 30, Period: time.Second, Burst: 1 << 30}

	floor := redis.NewScript("return 1")
	floorKeys := []string{"throttle:{bench}:floor"}

	// The whole acquire path a user gets: a Transport with WithRedis
	// (matching, the outage store's timeout and breaker, the heartbeat, the
	// batcher) in front of a base that answers at once. With go-redis's
	// default client the timeout is kept by a goroutine per call sent;
	// with ContextTimeoutEnabled in place.
	resp := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	base := rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	rule := Rule{Name: "bench", Limit: Limit{Rate: 1 << 20, Period: 2 * time.Second, Burst: 1 << 20}}
	ctxOpt := srv.Options()
	ctxOpt.PoolSize = 128
	ctxOpt.ContextTimeoutEnabled = true
	ctxRdb := srv.ClientWith(b, ctxOpt)
	trDefault := mustNew(b, base, WithRedis(rdb), WithNamespace("bench-tr"), WithRules(rule), WithRedisTimeout(time.Second))
	trCtx := mustNew(b, base, WithRedis(ctxRdb), WithNamespace("bench-tr-ctx"), WithRules(rule), WithRedisTimeout(time.Second))
	req := newReq(b, ctx, "GET", "http://api.example/v1")
	roundTrip := func(tr *Transport) func() error {
		return func() error {
			_, err := tr.RoundTrip(req)
			return err
		}
	}

	ops := []redisBenchOp{
		{"floor-evalsha", func() error { return floor.Run(ctx, rdb, floorKeys).Err() }},
		{"redis_rate-Allow", func() error { _, err := limiter.Allow(ctx, "bench", limit); return err }},
		{"store-reserve", func() error {
			r, err := s.reserve(ctx, bs, time.Second)
			if err == nil && !r.ok {
				return fmt.Errorf("reserve rejected: wait %v", r.wait)
			}
			return err
		}},
		{"Transport-default-client", roundTrip(trDefault)},
		{"Transport-ContextTimeoutEnabled", roundTrip(trCtx)},
	}
	for _, o := range ops {
		// Warm up: load the scripts, open connections.
		if err := o.op(); err != nil {
			b.Fatalf("%s: %v", o.name, err)
		}
	}
	return ops
}

// BenchmarkRedisInterleaved runs the variants of BenchmarkRedis in turn,
// round after round, so that every variant meets the same machine: on a
// shared VM a loopback round trip swings between 40 and 150 µs from one
// second to the next, far more than the variants differ, and separate
// benchmarks then compare the machine's moods. With 1 goroutine a round is
// one call of each variant; with 64, each variant in turn runs a phase of
// 2000 calls on 64 goroutines. It reports each variant's mean µs per call
// and its speed against redis_rate's (× > 1 is faster). Allocations are
// BenchmarkRedis's. Run with:
//
//	go test -run '^$' -bench 'RedisInterleaved' -benchtime 20000x .
func BenchmarkRedisInterleaved(b *testing.B) {
	ops := redisBenchOps(b)
	report := func(b *testing.B, spent []time.Duration, calls int) {
		var rr time.Duration
		for i, o := range ops {
			if o.name == "redis_rate-Allow" {
				rr = spent[i]
			}
		}
		for i, o := range ops {
			b.ReportMetric(float64(spent[i].Microseconds())/float64(calls), "µs/"+o.name)
			if o.name != "redis_rate-Allow" && spent[i] > 0 {
				b.ReportMetric(float64(rr)/float64(spent[i]), "x-redis_rate/"+o.name)
			}
		}
	}
	b.Run("goroutines=1", func(b *testing.B) {
		spent := make([]time.Duration, len(ops))
		for b.Loop() {
			for i, o := range ops {
				start := time.Now()
				if err := o.op(); err != nil {
					b.Fatal(err)
				}
				spent[i] += time.Since(start)
			}
		}
		report(b, spent, b.N)
	})
	b.Run("goroutines=64", func(b *testing.B) {
		const workers, phase = 64, 2000
		spent := make([]time.Duration, len(ops))
		rounds := max(b.N/phase, 1)
		for range rounds {
			for i, o := range ops {
				var left atomic.Int64
				left.Store(phase)
				var wg sync.WaitGroup
				start := time.Now()
				for range workers {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							if err := o.op(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				spent[i] += time.Since(start)
			}
		}
		report(b, spent, rounds*phase)
	})
}
