package throttle

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
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
// anyone wait (a huge rate), so every op is one script call. Run with:
//
//	go test -run '^$' -bench 'Redis' -benchmem -count 5 .
func BenchmarkRedis(b *testing.B) {
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
	// default client the timeout is kept by a goroutine per pipeline; with
	// ContextTimeoutEnabled in place.
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

	ops := []struct {
		name string
		op   func() error
	}{
		{"floor-evalsha", func() error { return floor.Run(ctx, rdb, floorKeys).Err() }},
		{"redis_rate-Allow", func() error { _, err := limiter.Allow(ctx, "bench", limit); return err }},
		{"store-reserve", func() error {
			r, err := s.reserve(ctx, bs, time.Second)
			if err == nil && !r.ok {
				b.Errorf("reserve rejected: wait %v", r.wait)
			}
			return err
		}},
		{"Transport-default-client", roundTrip(trDefault)},
		{"Transport-ContextTimeoutEnabled", roundTrip(trCtx)},
	}
	for _, o := range ops {
		// Warm up: load the script, open connections.
		if err := o.op(); err != nil {
			b.Fatalf("%s: %v", o.name, err)
		}
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
