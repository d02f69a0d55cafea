package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// BenchmarkRedis compares, against one private redis-server in one run, the
// cost of one acquire through the Redis store, and through a whole
// Transport, with redis_rate's Allow and a raw EVALSHA of "return 1", the
// floor of any one-round-trip-per-call design. The bucket never makes
// anyone wait (a huge rate). With 64 goroutines the store's calls share
// round trips and script calls (internal/redisstore/batch.go); the others make one of each per
// call. Run with:
//
//	go test -run '^$' -bench '^BenchmarkRedis' -benchmem -count 5 .   # in bench/
func BenchmarkRedis(b *testing.B) {
	ops, _ := redisBenchSetup(b)
	for _, o := range ops {
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

// redisBenchSetup starts a private redis-server and returns the variants
// BenchmarkRedis and BenchmarkRedisInterleaved compare, each loaded and
// connected (the floor, redis_rate, the Redis store, and whole Transports;
// the buckets never make anyone wait), and a function that reads the CPU
// time the redis-server has used so far (INFO cpu).
func redisBenchSetup(b *testing.B) ([]redisBenchOp, func() time.Duration) {
	srv := redistest.Start(b)
	opt := srv.Options()
	opt.PoolSize = 128
	rdb := srv.ClientWith(b, opt)
	ctx := context.Background()

	s := redisstore.New(rdb, redisstore.Options{Namespace: "bench"})
	bs := []store.Bucket{{Key: "bench-rule", Rule: "bench-rule", Interval: time.Microsecond, Burst: 1 << 20, Cost: 1}}

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
	rule := throttle.Rule{Name: "bench", Limit: throttle.Limit{Rate: 1 << 20, Period: 2 * time.Second, Burst: 1 << 20}}
	ctxOpt := srv.Options()
	ctxOpt.PoolSize = 128
	ctxOpt.ContextTimeoutEnabled = true
	ctxRdb := srv.ClientWith(b, ctxOpt)
	trDefault := mustNew(b, base, throttle.WithRedis(rdb), throttle.WithNamespace("bench-tr"), throttle.WithRules(rule), throttle.WithRedisTimeout(time.Second))
	trCtx := mustNew(b, base, throttle.WithRedis(ctxRdb), throttle.WithNamespace("bench-tr-ctx"), throttle.WithRules(rule), throttle.WithRedisTimeout(time.Second))
	req := newReq(b, ctx, "GET", "http://api.example/v1")
	roundTrip := func(tr *throttle.Transport) func() error {
		return func() error {
			_, err := tr.RoundTrip(req)
			return err
		}
	}

	ops := []redisBenchOp{
		{"floor-evalsha", func() error { return floor.Run(ctx, rdb, floorKeys).Err() }},
		{"redis_rate-Allow", func() error { _, err := limiter.Allow(ctx, "bench", limit); return err }},
		{"store-reserve", func() error {
			r, err := s.Reserve(ctx, bs, time.Second)
			if err == nil && !r.OK {
				return fmt.Errorf("reserve rejected: wait %v", r.Wait)
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
	cpu := func() time.Duration {
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var total float64
		for line := range strings.SplitSeq(info, "\n") {
			name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if name == "used_cpu_sys" || name == "used_cpu_user" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu: %q: %v", line, err)
				}
				total += f
			}
		}
		return time.Duration(total * float64(time.Second))
	}
	return ops, cpu
}

// BenchmarkRedisInterleaved runs the variants of BenchmarkRedis in turn,
// round after round, so that every variant meets the same machine: on a
// shared VM a loopback round trip swings between 40 and 350 µs from one
// second to the next, far more than the variants differ, and separate
// benchmarks then compare the machine's moods. A round runs each variant
// for a phase of calls: 100 calls on 1 goroutine, or 2000 on 64. It
// reports each variant's mean µs per call, its speed against redis_rate's
// (× > 1 is faster), the redis-server's CPU time per call (INFO cpu
// around each phase): what limits a fleet sharing one Redis, and this
// process's (getrusage around each phase: the client's, with the
// harness's small share, the same for every variant). Allocations are
// BenchmarkRedis's. Run with:
//
//	go test -run '^$' -bench 'RedisInterleaved' -benchtime 20000x .   # in bench/
func BenchmarkRedisInterleaved(b *testing.B) {
	ops, redisCPU := redisBenchSetup(b)
	for _, par := range []struct{ workers, phase int }{{1, 100}, {64, 2000}} {
		b.Run("goroutines="+strconv.Itoa(par.workers), func(b *testing.B) {
			spent := make([]time.Duration, len(ops))
			server := make([]time.Duration, len(ops))
			client := make([]time.Duration, len(ops))
			rounds := max(b.N/par.phase, 1)
			for range rounds {
				for i, o := range ops {
					var left atomic.Int64
					left.Store(int64(par.phase))
					var wg sync.WaitGroup
					cpu0 := redisCPU()
					self0 := processCPU()
					start := time.Now()
					for range par.workers {
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
					client[i] += processCPU() - self0
					server[i] += redisCPU() - cpu0
				}
			}
			calls := float64(rounds * par.phase)
			var rr time.Duration
			for i, o := range ops {
				if o.name == "redis_rate-Allow" {
					rr = spent[i]
				}
			}
			for i, o := range ops {
				b.ReportMetric(float64(spent[i].Microseconds())/calls, "µs/"+o.name)
				b.ReportMetric(float64(server[i].Microseconds())/calls, "redis-µs/"+o.name)
				b.ReportMetric(float64(client[i].Microseconds())/calls, "client-µs/"+o.name)
				if o.name != "redis_rate-Allow" && spent[i] > 0 {
					b.ReportMetric(float64(rr)/float64(spent[i]), "x-redis_rate/"+o.name)
				}
			}
		})
	}
}
