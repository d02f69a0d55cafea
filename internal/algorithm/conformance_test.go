package algorithm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// The conformance tests feed the same request traces, on fake clocks in
// whole microseconds, to the local store (internal/localstore, Go) and to
// the Redis store (internal/redisstore, Lua, with an explicit now) and
// demand identical decisions: ok, the wait to the microsecond, the
// limiter, the deferred buckets and the counts. Traces mix the five
// algorithms in one request, costs above 1, pauses, feedback caps and
// cancels.

// conformanceBuckets are the buckets the traces draw from; Burst is a
// window bucket's quota, as the root compiles it.
var conformanceBuckets = []store.Bucket{
	{Key: "lb", Rule: "lb", Algorithm: store.LeakyBucket, Interval: 100 * time.Millisecond, Burst: 3, Lateness: 100 * time.Millisecond, Period: 300 * time.Millisecond, Rate: 3},
	{Key: "tb", Rule: "tb", Algorithm: store.TokenBucket, Interval: 150 * time.Millisecond, Burst: 2, Lateness: 150 * time.Millisecond, Period: 300 * time.Millisecond, Rate: 2},
	{Key: "fw", Rule: "fw", Algorithm: store.FixedWindow, Interval: 200 * time.Millisecond, Burst: 5, Period: time.Second, Rate: 5, Anchor: 300 * time.Millisecond, Edge: 40 * time.Millisecond},
	{Key: "sl", Rule: "sl", Algorithm: store.SlidingLog, Interval: 250 * time.Millisecond, Burst: 4, Period: time.Second, Rate: 4},
	{Key: "sc", Rule: "sc", Algorithm: store.SlidingCounter, Interval: 125 * time.Millisecond, Burst: 8, Period: time.Second, Rate: 8, Edge: 30 * time.Millisecond},
}

// traceStep is one step of a trace.
type traceStep struct {
	advance time.Duration
	op      string // "reserve", "cancel", "pause", "limit"
	buckets []int  // indices into conformanceBuckets
	costs   []int64
	sent    []int64
	maxWait time.Duration
	of      int // cancel: the step whose reservation goes back
	d       time.Duration
	cap     store.Cap
}

// randomTrace returns n steps drawn from seed.
func randomTrace(seed uint64, n int, pool []int) []traceStep {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var steps []traceStep
	var reserved []int
	for i := range n {
		st := traceStep{advance: time.Duration(rng.IntN(300_000)) * time.Microsecond}
		switch r := rng.IntN(100); {
		case r < 8 && len(reserved) > 0:
			st.op, st.of = "cancel", reserved[rng.IntN(len(reserved))]
		case r < 12:
			st.op = "pause"
			st.buckets = pick(rng, pool)
			st.d = time.Duration(rng.IntN(1_500_000)) * time.Microsecond
		case r < 15:
			st.op = "limit"
			st.buckets = pick(rng, pool)[:1]
			rates := []float64{0, 2, 4, 5, 8, 10, 20}
			// A debt is a high-water mark of the count: some steps
			// repeat or lower it, which must push nothing.
			debts := []float64{0, 0, 1.5, 3, 3}
			// A debt due by a time the push must not pass, or none.
			payBys := []time.Duration{0, 0, 100 * time.Millisecond, 700*time.Millisecond + 1}
			st.cap = store.Cap{Rate: rates[rng.IntN(len(rates))], Span: time.Duration(1+rng.IntN(3)) * time.Second, Debt: debts[rng.IntN(len(debts))], PayBy: payBys[rng.IntN(len(payBys))]}
		default:
			st.op = "reserve"
			st.buckets = pick(rng, pool)
			for _, b := range st.buckets {
				st.costs = append(st.costs, 1+rng.Int64N(min(conformanceBuckets[b].Burst, 3)))
				st.sent = append(st.sent, rng.Int64N(3))
			}
			waits := []time.Duration{0, 50 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second, 10 * time.Second}
			st.maxWait = waits[rng.IntN(len(waits))]
			reserved = append(reserved, i)
		}
		steps = append(steps, st)
	}
	return steps
}

// pick returns one to three distinct buckets of pool, in random order.
func pick(rng *rand.Rand, pool []int) []int {
	p := append([]int(nil), pool...)
	rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p[:1+rng.IntN(min(3, len(p)))]
}

func redisCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testNamespace(t testing.TB) string {
	return strings.NewReplacer("/", "_", "{", "(", "}", ")", " ", "_").Replace(t.Name())
}

// runTrace runs steps through a local and a Redis store on rdb and
// reports every difference; it returns the number of reservations booked,
// so that a caller can tell the trace did something.
func runTrace(t *testing.T, rdb redis.UniversalClient, steps []traceStep) (booked int) {
	t.Helper()
	ctx := redisCtx(t)
	start := time.Unix(1_700_000_000, 123_000)
	lclk, rclk := fakeclock.New(start), fakeclock.New(start)
	local := localstore.New(lclk)
	remote := redisstore.New(rdb, redisstore.Options{Namespace: testNamespace(t), NowMicros: func() int64 { return rclk.Now().UnixMicro() }})
	logKey := "throttle:{" + testNamespace(t) + "}:sl"
	lres := make([]store.Reservation, len(steps))
	rres := make([]store.Reservation, len(steps))
	for i, st := range steps {
		lclk.Advance(st.advance)
		rclk.Advance(st.advance)
		var bs []store.Bucket
		for j, bi := range st.buckets {
			b := conformanceBuckets[bi]
			b.Cost = 1
			if st.costs != nil {
				b.Cost, b.Sent = st.costs[j], st.sent[j]
			}
			bs = append(bs, b)
		}
		switch st.op {
		case "reserve":
			l, lerr := local.Reserve(ctx, bs, st.maxWait)
			r, rerr := remote.Reserve(ctx, bs, st.maxWait)
			if lerr != nil || rerr != nil {
				t.Fatalf("step %d: local %v, redis %v", i, lerr, rerr)
			}
			lres[i], rres[i] = l, r
			if l.OK != r.OK || l.Wait != r.Wait || l.Limiter != r.Limiter || fmt.Sprint(l.Deferred) != fmt.Sprint(r.Deferred) {
				t.Fatalf("step %d %v costs %v maxWait %v: local ok=%v wait=%v limiter=%d deferred=%v; redis ok=%v wait=%v limiter=%d deferred=%v",
					i, names(bs), st.costs, st.maxWait, l.OK, l.Wait, l.Limiter, l.Deferred, r.OK, r.Wait, r.Limiter, r.Deferred)
			}
			if l.OK {
				booked++
			}
			for j := range bs {
				if l.Count(j) != r.Count(j) {
					t.Fatalf("step %d: bucket %s counted %d locally, %d in Redis", i, bs[j].Key, l.Count(j), r.Count(j))
				}
			}
			if l.Wait < 0 {
				t.Fatalf("step %d: negative wait %v", i, l.Wait)
			}
		case "cancel":
			if err := lres[st.of].Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			if err := rres[st.of].Cancel(ctx); err != nil {
				t.Fatal(err)
			}
		case "pause":
			if err := local.Pause(ctx, bs, st.d); err != nil {
				t.Fatal(err)
			}
			if err := remote.Pause(ctx, bs, st.d); err != nil {
				t.Fatal(err)
			}
		case "limit":
			if _, err := local.Limit(ctx, bs[0], st.cap); err != nil {
				t.Fatal(err)
			}
			if _, err := remote.Limit(ctx, bs[0], st.cap); err != nil {
				t.Fatal(err)
			}
		}
		// The sliding log holds at most its quota, however far ahead
		// its waiters book (algorithm.LogBook).
		if n, err := rdb.ZCard(ctx, logKey).Result(); err != nil {
			t.Fatal(err)
		} else if q := conformanceBuckets[3].Burst; n > q {
			t.Fatalf("step %d: the sliding log holds %d entries, quota %d", i, n, q)
		}
	}
	return booked
}

func names(bs []store.Bucket) []string {
	var n []string
	for _, b := range bs {
		n = append(n, b.Key)
	}
	return n
}

// conformanceTraces are the traces of both the single node and the
// Cluster: each algorithm alone, then all mixed.
func conformanceTraces() map[string][]traceStep {
	traces := map[string][]traceStep{}
	for i, b := range conformanceBuckets {
		for seed := range uint64(3) {
			traces[fmt.Sprintf("%s/seed=%d", b.Key, seed)] = randomTrace(seed+uint64(10*i), 300, []int{i})
		}
	}
	for seed := range uint64(6) {
		traces[fmt.Sprintf("mixed/seed=%d", seed)] = randomTrace(100+seed, 400, []int{0, 1, 2, 3, 4})
	}
	// A cap slower than each window rule (2/s), its count, a cancel and a
	// pause under it, then the same request in all five buckets.
	for _, i := range []int{2, 3, 4} {
		steps := []traceStep{{op: "limit", buckets: []int{i}, cap: store.Cap{Rate: 2, Span: 5 * time.Second}}}
		for k := range 10 {
			steps = append(steps, traceStep{advance: 100 * time.Millisecond, op: "reserve", buckets: []int{i}, costs: []int64{1 + int64(k%2)}, sent: []int64{1}, maxWait: 10 * time.Second})
		}
		steps = append(steps,
			traceStep{op: "cancel", of: 10},
			traceStep{op: "pause", buckets: []int{i}, d: 700 * time.Millisecond},
			traceStep{op: "reserve", buckets: []int{0, 1, 2, 3, 4}, costs: []int64{1, 2, 2, 3, 1}, sent: []int64{0, 0, 1, 1, 1}, maxWait: 10 * time.Second},
			traceStep{advance: 3 * time.Second, op: "reserve", buckets: []int{i, 0}, costs: []int64{1, 1}, sent: []int64{1, 0}, maxWait: 10 * time.Second},
		)
		traces[fmt.Sprintf("%s/capped", conformanceBuckets[i].Key)] = steps
	}
	// Sliding-log waiters booking up to ten periods ahead, the latest of
	// them giving up now and then: the refunds of a log trimmed to its
	// quota, with entries at one instant and costs above 1.
	var ahead []traceStep
	for k := range 300 {
		if k%7 == 6 {
			ahead = append(ahead, traceStep{op: "cancel", of: k - 1 - k%3})
			continue
		}
		ahead = append(ahead, traceStep{advance: time.Duration(k%5) * 40 * time.Millisecond, op: "reserve", buckets: []int{3}, costs: []int64{1 + int64(k%3)}, sent: []int64{0}, maxWait: 10 * time.Second})
	}
	traces["sl/ahead"] = ahead
	return traces
}

func TestConformanceSingleNode(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	for name, steps := range conformanceTraces() {
		t.Run(name, func(t *testing.T) {
			if n := runTrace(t, rdb, steps); n == 0 {
				t.Fatal("the trace booked nothing")
			}
		})
	}
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t, 3).Client(t)
	for name, steps := range conformanceTraces() {
		t.Run(name, func(t *testing.T) {
			if n := runTrace(t, rdb, steps); n == 0 {
				t.Fatal("the trace booked nothing")
			}
		})
	}
}

// TestConformanceACL runs the mixed traces as the least-privilege ACL user
// docs/REDIS.md shows: every command the scripts send for the five
// algorithms (pauses, caps and cancels included) is in its list.
func TestConformanceACL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithACL(
		"user throttle on >fleet-password resetkeys ~throttle:* resetchannels -@all +evalsha +eval +get +set +time +zadd +zremrangebyscore +zcard +zrange +zcount +zrem +pexpire",
	))
	rdb := srv.ClientAs(t, "throttle", "fleet-password")
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("mixed/seed=%d", seed), func(t *testing.T) {
			if n := runTrace(t, rdb, randomTrace(100+seed, 400, []int{0, 1, 2, 3, 4})); n == 0 {
				t.Fatal("the trace booked nothing")
			}
		})
	}
}
