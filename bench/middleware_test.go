package bench

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/httprate"
	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/middleware"
)

// The middleware's benchmarks: decisions per second of a Limiter around a
// handler that does nothing, beside github.com/go-chi/httprate (v0.16.1,
// its in-memory sliding-window counter) in the same run, both keyed per
// client IP, both at a limit never reached (every request admitted, the
// headers of each set); then the Limiter through Redis, one node and a
// Cluster. Self-contained: this file needs nothing of the suite's other
// files. (It lives in the bench module so that httprate stays out of the
// library's go.mod.)
//
//	go -C bench test -run '^$' -bench Middleware -benchtime 2s -count 6 .
//
// BENCHMARKS.md has the figures.

// benchClients is the number of client IPs the requests cycle through.
const benchClients = 1024

// benchWriter is a ResponseWriter that keeps nothing but its header map,
// emptied before each request: a recorder's allocations would be most of
// what is measured.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// benchRequests returns one GET request per client IP.
func benchRequests() []*http.Request {
	rs := make([]*http.Request, benchClients)
	for i := range rs {
		r, _ := http.NewRequest(http.MethodGet, "http://api.example/v1/things", nil)
		r.RemoteAddr = "198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":40000"
		rs[i] = r
	}
	return rs
}

var nop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// runHandler runs h serially and in parallel over the requests, and
// reports the share refused (refused/op: 0 when the limit is never
// reached).
func runHandler(b *testing.B, h http.Handler) { runHandlerWith(b, h, 1, nil) }

// runHandlerWith is runHandler with p·GOMAXPROCS goroutines in the
// parallel run (SetParallelism holds for the sub-benchmark it is called
// in only), and stats (if not nil) called around each parallel run:
// before it with b nil to reset, after it to report.
func runHandlerWith(b *testing.B, h http.Handler, p int, stats func(*testing.B)) {
	rs := benchRequests()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		w := &benchWriter{h: make(http.Header)}
		refused, i := 0, 0
		for b.Loop() {
			clear(w.h)
			w.code = 200
			h.ServeHTTP(w, rs[i%benchClients])
			if w.code != 200 {
				refused++
			}
			i++
		}
		b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(p)
		if stats != nil {
			stats(nil)
			defer stats(b)
		}
		var refused, next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			w := &benchWriter{h: make(http.Header)}
			i := int(next.Add(7919))
			n := int64(0)
			for pb.Next() {
				clear(w.h)
				w.code = 200
				h.ServeHTTP(w, rs[i%benchClients])
				if w.code != 200 {
					n++
				}
				i++
			}
			refused.Add(n)
		})
		b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
	})
}

// benchRule never refuses in a benchmark: 10⁹ a second per client, with
// a burst of 10⁶.
var benchRule = throttle.Rule{
	Name:  "per-ip",
	Limit: throttle.Limit{Rate: 1_000_000_000, Period: time.Second, Burst: 1_000_000},
	Key:   middleware.ClientIP(),
}

// httprateKeyByPeer is httprate's key of the connection's peer, as
// ClientIP without trusted proxies keys (httprate deprecates KeyByIP only
// to make the choice of IP source explicit).
func httprateKeyByPeer(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(host), nil
}

// BenchmarkMiddlewareLocal: the decision in process, beside httprate.
func BenchmarkMiddlewareLocal(b *testing.B) {
	b.Run("throttle", func(b *testing.B) {
		l, err := middleware.New(middleware.WithRules(benchRule))
		if err != nil {
			b.Fatal(err)
		}
		runHandler(b, l.Handler(nop))
	})
	b.Run("httprate", func(b *testing.B) {
		runHandler(b, httprate.LimitBy(1_000_000_000, time.Second, httprateKeyByPeer)(nop))
	})
	b.Run("handler", func(b *testing.B) { runHandler(b, nop) })
}

// BenchmarkMiddlewareRedis: the decision through Redis, two script calls an
// admitted request (the reservation, the read of its room), or one with
// WithoutRedisRoom ("-noroom"): a private redis-server, and a Cluster of
// 3 masters with the buckets spread by WithHashTagPerKey. The parallel runs keep 32 requests in
// flight per CPU, which is what a server's connections do; go-redis's
// pool then batches nothing (every call is its own round trip, pipelined
// by the Redis store's batcher when several wait).
func BenchmarkMiddlewareRedis(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
		b.Cleanup(func() { _ = rdb.Close() })
		benchRedis(b, rdb)
	})
	b.Run("single-noroom", func(b *testing.B) {
		srv := redistest.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
		b.Cleanup(func() { _ = rdb.Close() })
		benchRedis(b, rdb, middleware.WithoutRedisRoom())
	})
	b.Run("cluster3", func(b *testing.B) {
		c := redistest.StartCluster(b, 3)
		opt := c.Options()
		opt.PoolSize = 64
		rdb := c.ClientWith(b, opt)
		benchRedis(b, rdb, middleware.WithHashTagPerKey())
	})
	b.Run("cluster3-noroom", func(b *testing.B) {
		c := redistest.StartCluster(b, 3)
		opt := c.Options()
		opt.PoolSize = 64
		rdb := c.ClientWith(b, opt)
		benchRedis(b, rdb, middleware.WithHashTagPerKey(), middleware.WithoutRedisRoom())
	})
}

// redisBenchRule is benchRule at the Redis store's resolution: 10⁶ a
// second per client, a burst of 10⁶.
var redisBenchRule = throttle.Rule{
	Name:  "per-ip",
	Limit: throttle.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000},
	Key:   middleware.ClientIP(),
}

func benchRedis(b *testing.B, rdb redis.UniversalClient, opts ...middleware.Option) {
	opts = append(opts, middleware.WithRedis(rdb), middleware.WithRules(redisBenchRule), middleware.WithRedisTimeout(time.Second))
	l, err := middleware.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	runHandlerWith(b, l.Handler(nop), 32, func(b *testing.B) { redisStats(b, rdb) })
}

// redisStats resets Redis's command statistics (b nil), or reports from
// them the scripts' calls per request and the Redis CPU time a call took
// (redis-µs/call, summed over a Cluster's masters): what one Redis core
// sustains is 10⁶ / (calls/op · redis-µs/call) requests a second, whatever
// else shares this machine's CPUs.
func redisStats(b *testing.B, rdb redis.UniversalClient) {
	ctx := context.Background()
	each := func(fn func(*redis.Client)) {
		if c, ok := rdb.(*redis.ClusterClient); ok {
			_ = c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { fn(n); return nil })
			return
		}
		if c, ok := rdb.(*redis.Client); ok {
			fn(c)
		}
	}
	if b == nil {
		each(func(c *redis.Client) { _ = c.ConfigResetStat(ctx).Err() })
		return
	}
	var calls, usec float64
	each(func(c *redis.Client) {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return
		}
		for line := range strings.SplitSeq(info, "\n") {
			if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
				continue
			}
			for kv := range strings.SplitSeq(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					calls += n
				case "usec":
					usec += n
				}
			}
		}
	})
	if calls > 0 {
		b.ReportMetric(calls/float64(b.N), "calls/op")
		b.ReportMetric(usec/calls, "redis-µs/call")
	}
}
