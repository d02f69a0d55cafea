package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	uluredis "github.com/ulule/limiter/v3/drivers/store/redis"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redistest"
)

// The algorithm benchmarks measure one decision of each of the five
// algorithms (Rule.Algorithm) through the public API, a Transport's
// RoundTrip in front of a base that answers at once, in process and
// through a private redis-server, beside the limiters users would pick
// instead, in the same run:
//
//   - in process: golang.org/x/time/rate (a token bucket) Allow,
//     go.uber.org/ratelimit (a leaky bucket) Take, and
//     github.com/ulule/limiter/v3's memory store (a fixed window: a count
//     and an expiry per key) Get;
//   - in Redis: go-redis/redis_rate v10 (GCRA, one Lua call) Allow and
//     ulule/limiter's redis store (a fixed window: INCRBY and PEXPIRE in
//     one Lua call) Get.
//
// Every limiter is set so that no call ever waits or is refused: a billion
// units a second (a million for the Transport through Redis, whose store
// counts in µs), and for the leaky and token buckets a burst of a
// million. So each measures its decision, not its waiting; a sliding log
// then holds the calls of its last second (about a second's worth of the
// benchmark's calls). A Transport's figure is a whole RoundTrip (matching
// the rule, the decision, reading the response's headers): less the base's
// own ("base"), that is the cost a user pays per request. The file uses
// only the root package's exported API and internal/redistest. Run from
// the repository's root with:
//
//	go -C bench test -run '^$' -bench 'Algorithms' -benchtime 40x -count 2 -v .
//
// BENCHMARKS.md gives the figures and their ratios.

// algBenchRate is every limiter's rate per second: one per ns, so that no
// call waits.
const algBenchRate = 1_000_000_000

// algBenchRedisRate is the Transport's rate per second through Redis,
// whose store counts in µs: one per µs, twenty times what one
// redis-server answers here.
const algBenchRedisRate = 1_000_000

// algBenchBurst is the burst of the limiters that have one.
const algBenchBurst = 1_000_000

// algBenchAlgorithms are the five algorithms, by the names the
// sub-benchmarks take.
var algBenchAlgorithms = []throttle.Algorithm{
	throttle.LeakyBucket, throttle.TokenBucket, throttle.FixedWindow, throttle.SlidingLog, throttle.SlidingCounter,
}

// algBenchRule returns a rule of algorithm a and the given rate per second
// that never makes a request wait at the benchmarks' pace. A window
// algorithm takes no burst.
func algBenchRule(a throttle.Algorithm, perSecond int) throttle.Rule {
	l := throttle.Limit{Rate: perSecond, Period: time.Second, Burst: algBenchBurst}
	if a != throttle.LeakyBucket && a != throttle.TokenBucket {
		l.Burst = 0
	}
	return throttle.Rule{Name: "bench-" + a.String(), Algorithm: a, Limit: l}
}

// algBenchBase answers every request at once with a prepared ordinary
// response (a Content-Type, no rate-limit headers), as the root's other
// benchmarks do.
type algBenchBase struct{ resp *http.Response }

func (b algBenchBase) RoundTrip(*http.Request) (*http.Response, error) { return b.resp, nil }

func newAlgBenchBase() algBenchBase {
	return algBenchBase{&http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: http.NoBody}}
}

// algBenchTransport returns a Transport of the one rule of algorithm a, at
// perSecond, over base, with opts (WithRedis), and a call of its RoundTrip that reports
// whether it went at once. The request is reused: RoundTrip keeps nothing
// of it.
func algBenchTransport(b *testing.B, base http.RoundTripper, a throttle.Algorithm, perSecond int, opts ...throttle.Option) func() bool {
	b.Helper()
	tr, err := throttle.New(base, append(opts, throttle.WithRules(algBenchRule(a, perSecond)), throttle.WithoutWaiting())...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Close() })
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example/v1", nil)
	if err != nil {
		b.Fatal(err)
	}
	return func() bool {
		_, err := tr.RoundTrip(req)
		return err == nil
	}
}

// algBenchOp is one limiter's decision; f reports whether the call went
// at once. An anchor is a library the Transport is compared with.
type algBenchOp struct {
	name   string
	anchor bool
	f      func() bool
}

// algBenchInterleaved runs ops in rounds, one per b.Loop iteration: each
// op in turn makes phase calls from goroutines goroutines, the starting
// op rotating from round to round, so that every op meets the same
// machine (on a shared one the absolute figures drift from one second to
// the next; interleaved, the ratios hold). It reports per op the time per
// call (<op>-ns/call), the process's allocations per call during its
// phases (<op>-allocs/call: the Transport's own goroutines included) and
// the share of calls that did not go at once (denied/call, all ops: 0
// expected, but a goroutine preempted between reading the clock and
// taking a limiter's lock may arrive with a stale now on a loaded
// machine), and logs a table of each op's time per call as a multiple of
// each anchor's in the same round. Times and ratios are medians over the
// rounds.
func algBenchInterleaved(b *testing.B, ops []algBenchOp, phase, goroutines int) {
	var spent [][]float64 // per round, per op: ns per call
	mallocs := make([]uint64, len(ops))
	var denied atomic.Int64
	run := func(f func() bool) {
		if goroutines == 1 {
			for range phase {
				if !f() {
					denied.Add(1)
				}
			}
			return
		}
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for range phase/goroutines + boolInt(g < phase%goroutines) {
					if !f() {
						denied.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}
	var m0, m1 runtime.MemStats
	round := 0
	for b.Loop() {
		ns := make([]float64, len(ops))
		for k := range ops {
			i := (k + round) % len(ops)
			runtime.ReadMemStats(&m0)
			t0 := time.Now()
			run(ops[i].f)
			ns[i] = float64(time.Since(t0).Nanoseconds()) / float64(phase)
			runtime.ReadMemStats(&m1)
			mallocs[i] += m1.Mallocs - m0.Mallocs
		}
		spent = append(spent, ns)
		round++
	}
	// Medians over the rounds: a round that met a burst of the machine's
	// other load moves a median less than a mean.
	median := func(f func(ns []float64) float64) float64 {
		v := make([]float64, len(spent))
		for r, ns := range spent {
			v[r] = f(ns)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	calls := float64(round * phase)
	perCall := make([]float64, len(ops))
	for i, o := range ops {
		perCall[i] = median(func(ns []float64) float64 { return ns[i] })
		b.ReportMetric(perCall[i], o.name+"-ns/call")
		b.ReportMetric(float64(mallocs[i])/calls, o.name+"-allocs/call")
	}
	b.ReportMetric(float64(denied.Load())/(calls*float64(len(ops))), "denied/call")
	var table strings.Builder
	table.WriteString("\n| op | ns/call | allocs/call |")
	for _, o := range ops {
		if o.anchor {
			table.WriteString(" × " + o.name + " |")
		}
	}
	for i, o := range ops {
		fmt.Fprintf(&table, "\n| %s | %.0f | %.1f |", o.name, perCall[i], float64(mallocs[i])/calls)
		for j, a := range ops {
			if a.anchor {
				fmt.Fprintf(&table, " %.2f |", median(func(ns []float64) float64 { return ns[i] / ns[j] }))
			}
		}
	}
	b.Logf("%d rounds of %d calls per op, %d goroutines:%s", round, phase, goroutines, table.String())
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// BenchmarkAlgorithmsLocal: each algorithm's decision in process beside
// x/time/rate, uber's ratelimit and ulule/limiter's memory store, from one
// goroutine and from GOMAXPROCS. "base" is the base transport alone: a
// Transport's overhead is its figure less base's (about 2 ns).
func BenchmarkAlgorithmsLocal(b *testing.B) {
	base := newAlgBenchBase()
	ops := []algBenchOp{{name: "base", f: func() bool {
		_, err := base.RoundTrip(nil)
		return err == nil
	}}}
	for _, a := range algBenchAlgorithms {
		ops = append(ops, algBenchOp{name: "throttle-" + a.String(), f: algBenchTransport(b, base, a, algBenchRate)})
	}
	tb := rate.NewLimiter(algBenchRate, algBenchBurst)
	lb := ratelimit.New(algBenchRate)
	// No clean-up goroutine (CleanUpInterval 0): one key, and none left
	// behind for goleak.
	fw := limiter.New(ululememory.NewStoreWithOptions(limiter.StoreOptions{Prefix: "bench"}),
		limiter.Rate{Period: time.Second, Limit: algBenchRate})
	ctx := context.Background()
	ops = append(ops,
		algBenchOp{"x-time-rate-Allow", true, tb.Allow},
		algBenchOp{"uber-ratelimit-Take", true, func() bool { lb.Take(); return true }},
		algBenchOp{"ulule-limiter-memory", true, func() bool {
			lc, err := fw.Get(ctx, "bench")
			return err == nil && !lc.Reached
		}},
	)
	for _, g := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) { algBenchInterleaved(b, ops, 2000, g) })
	}
}

// BenchmarkAlgorithmsRedis: each algorithm's decision through one private
// redis-server beside redis_rate and ulule/limiter's redis store, from 1
// and from 64 goroutines (the Transport's batcher then shares round trips
// between concurrent requests; the others make one per call).
func BenchmarkAlgorithmsRedis(b *testing.B) {
	srv := redistest.Start(b)
	opt := srv.Options()
	opt.PoolSize = 128
	rdb := srv.ClientWith(b, opt)
	ctx := context.Background()
	base := newAlgBenchBase()

	var ops []algBenchOp
	for _, a := range algBenchAlgorithms {
		ops = append(ops, algBenchOp{name: "throttle-" + a.String(), f: algBenchTransport(b, base, a, algBenchRedisRate,
			throttle.WithRedis(rdb), throttle.WithNamespace("bench-"+a.String()), throttle.WithRedisTimeout(time.Second))})
	}
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: algBenchRate, Period: time.Second, Burst: algBenchRate}
	ulStore, err := uluredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "bench-ulule", MaxRetry: 3})
	if err != nil {
		b.Fatal(err)
	}
	fw := limiter.New(ulStore, limiter.Rate{Period: time.Second, Limit: algBenchRate})
	ops = append(ops,
		algBenchOp{"redis_rate-Allow", true, func() bool {
			r, err := rr.Allow(ctx, "bench", rrLimit)
			return err == nil && r.Allowed > 0
		}},
		algBenchOp{"ulule-limiter-redis", true, func() bool {
			lc, err := fw.Get(ctx, "bench")
			return err == nil && !lc.Reached
		}},
	)
	for _, o := range ops {
		if !o.f() { // warm up: load the scripts, open connections
			b.Fatalf("%s: the first call was refused or failed", o.name)
		}
	}
	b.Run("goroutines=1", func(b *testing.B) { algBenchInterleaved(b, ops, 200, 1) })
	b.Run("goroutines=64", func(b *testing.B) { algBenchInterleaved(b, ops, 2000, 64) })
}
