package throttle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/outage"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// redisTestTimeout bounds every Redis call of these tests; generous because
// the machine is shared.
const redisTestTimeout = 20 * time.Second

// sharedRedis is WithRedis for the tests of sharing: with the default 50 ms
// bound a Redis call slowed past it by a loaded CI machine (the race
// detector, a parallel fault test) sends that request to the outage
// fallback, whose local bucket admits what the shared one would not (a 4th
// request of a burst of 3 in the CI run of 2026-12-05). Outages have their
// own tests (outage_test.go, internal/faulttest).
func sharedRedis(rdb redis.UniversalClient) Option {
	return optionFunc(func(c *config) {
		WithRedis(rdb).apply(c)
		WithRedisTimeout(redisTestTimeout).apply(c)
	})
}

func redisCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), redisTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

// testNamespace gives each test its own namespace, so tests sharing a
// server never share a bucket.
func testNamespace(t testing.TB) string {
	return strings.NewReplacer("/", "_", "{", "(", "}", ")", " ", "_").Replace(t.Name())
}

// decisionStep is one step of a sequence run through both stores.
type decisionStep struct {
	advance time.Duration // move the clock first
	op      string        // "reserve", "refund", "pause", "limit" or "charge"
	buckets []int         // indices into the case's buckets (reserve, pause)
	costs   []int64       // per bucket; nil means 1 each
	maxWait time.Duration // reserve
	of      int           // refund: the step whose reservation to give back; charge: whose mark to pass
	units   int64         // charge: the units (< 0: a refund), on the step's first bucket
	pause   time.Duration // pause
	cap     store.Cap     // limit, on the step's first bucket
	sent    []int64       // reserve: per bucket, the units reported sent (bucket.sent)
	// want, when set, is the wait the reserve must get (both stores).
	want *time.Duration
}

// wait returns a pointer to d, for decisionStep.want.
func wait(d time.Duration) *time.Duration { return &d }

// redisStoreAt returns a Redis store on rdb in namespace ns whose scripts
// take now from clk instead of Redis's TIME.
func redisStoreAt(rdb redis.UniversalClient, ns string, clk *fakeclock.Clock, opts ...func(*redisstore.Options)) *redisstore.Store {
	o := redisstore.Options{Namespace: ns, NowMicros: func() int64 { return clk.Now().UnixMicro() }}
	for _, opt := range opts {
		opt(&o)
	}
	return redisstore.New(rdb, o)
}

// decisionCase is a sequence of steps on some buckets.
type decisionCase struct {
	name    string
	buckets []store.Bucket
	steps   []decisionStep
}

// decisionCases are sequences whose decisions the Redis store must share
// with the local store (internal/localstore). Intervals are whole microseconds, so both agree exactly.
var decisionCases = []decisionCase{
	{
		name:    "burst then queue",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 10 * time.Millisecond, Burst: 3}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
		},
	},
	{
		name:    "steady state",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 100 * time.Millisecond, Burst: 2}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{advance: 100 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{advance: 100 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{advance: 50 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{advance: 10 * time.Second, op: "reserve", buckets: []int{0}, maxWait: 0},
			{op: "reserve", buckets: []int{0}, maxWait: 0},
			{op: "reserve", buckets: []int{0}, maxWait: 0},
		},
	},
	{
		name:    "cost above one",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: time.Millisecond, Burst: 10}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, costs: []int64{7}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, costs: []int64{5}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, costs: []int64{10}, maxWait: time.Second},
			{advance: 3 * time.Millisecond, op: "reserve", buckets: []int{0}, costs: []int64{1}, maxWait: time.Second},
		},
	},
	{
		name: "multi-bucket all or nothing",
		buckets: []store.Bucket{
			{Key: "fast", Rule: "fast", Interval: time.Millisecond, Burst: 5},
			{Key: "slow", Rule: "slow", Interval: time.Second, Burst: 1},
		},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0, 1}, maxWait: 2 * time.Second},
			// slow needs a second: rejected, and fast books nothing.
			{op: "reserve", buckets: []int{0, 1}, maxWait: 500 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, costs: []int64{4}, maxWait: 0},
			// Booked in both at slow's departure.
			{op: "reserve", buckets: []int{0, 1}, maxWait: 2 * time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: 2 * time.Second},
		},
	},
	{
		name:    "maxWait rejection books nothing",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 50 * time.Millisecond, Burst: 1}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: 0},
			{op: "reserve", buckets: []int{0}, maxWait: 10 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, maxWait: 10 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, maxWait: 50 * time.Millisecond},
		},
	},
	{
		name:    "refund of the last booking",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 100 * time.Millisecond, Burst: 1}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "refund", of: 1},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
		},
	},
	{
		name:    "refund with bookings behind",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 100 * time.Millisecond, Burst: 1}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "refund", of: 1},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
		},
	},
	{
		name: "refund of two buckets, one with a booking behind",
		buckets: []store.Bucket{
			{Key: "a", Rule: "a", Interval: 100 * time.Millisecond, Burst: 1},
			{Key: "b", Rule: "b", Interval: 100 * time.Millisecond, Burst: 1},
		},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
			{op: "reserve", buckets: []int{1}, maxWait: time.Second},
			{op: "refund", of: 0},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{1}, maxWait: time.Second},
		},
	},
	{
		name: "pause",
		buckets: []store.Bucket{
			{Key: "a", Rule: "a", Interval: 10 * time.Millisecond, Burst: 5},
			{Key: "b", Rule: "b", Interval: time.Millisecond, Burst: 1},
		},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "pause", buckets: []int{0, 1}, pause: 500 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{1}, maxWait: time.Second},
			// A shorter pause never shortens a longer one.
			{op: "pause", buckets: []int{0}, pause: 10 * time.Millisecond},
			{advance: 600 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: 0},
			{op: "reserve", buckets: []int{0}, maxWait: 0},
		},
	},
	{
		// A cut stretches what the bucket booked ahead (here 50 ms at
		// 10 ms a slot) to the cap's interval, from now or from the end of
		// a pause; a raise compresses nothing.
		name:    "a success's cut paces what books after it; a rejection's stretches the booked queue, a raise does not",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 10 * time.Millisecond, Burst: 1}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(0)},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(40 * time.Millisecond)},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 50, Span: time.Second}}, // 20 ms a slot, from the next
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(50 * time.Millisecond)},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 100, Span: time.Second}}, // the rule's again
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(70 * time.Millisecond)},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 50, Span: time.Second, Retime: true}}, // the 80 ms booked, stretched to 160
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(160 * time.Millisecond)},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 100, Span: time.Second, Retime: true}}, // a raise compresses nothing
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(180 * time.Millisecond)},
			{op: "pause", buckets: []int{0}, pause: 200 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(200 * time.Millisecond)},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 25, Span: time.Second, Retime: true}}, // 40 ms a slot, the lead after the pause stretched
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(240 * time.Millisecond)},
		},
	},
	{
		name:    "capped, counted, climbing, then over",
		buckets: []store.Bucket{{Key: "a", Rule: "a", Interval: 10 * time.Millisecond, Burst: 1}, {Key: "b", Rule: "b", Interval: time.Millisecond, Burst: 5}},
		steps: []decisionStep{
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{4}}, // not counted: the report is dropped
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 50, Span: time.Second}},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{3}},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second, sent: []int64{2, 7}},
			{op: "refund", of: 4},
			{op: "reserve", buckets: []int{0}, maxWait: 10 * time.Millisecond, sent: []int64{1}}, // rejected: not counted
			{advance: 100 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{1}},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 20, Slope: 100, Span: 2 * time.Second}},
			{advance: 50 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{advance: 300 * time.Millisecond, op: "reserve", buckets: []int{0}, maxWait: time.Second},
			{op: "limit", buckets: []int{0}, cap: store.Cap{Span: 500 * time.Millisecond}}, // count only
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{5}},
			{op: "pause", buckets: []int{0}, pause: 100 * time.Millisecond},
			{op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{1}},
			{advance: time.Second, op: "reserve", buckets: []int{0}, maxWait: time.Second, sent: []int64{9}}, // the count has ended
			{op: "limit", buckets: []int{0}, cap: store.Cap{Rate: 1, Span: time.Second}},                     // and starts afresh
			{op: "reserve", buckets: []int{0}, maxWait: 2 * time.Second, sent: []int64{2}},
		},
	},
	creditCase,
}

// creditCase holds both stores to the same credits (internal/localstore's
// credit.go): a refund to a queue becomes a credit bounded by the refunded
// request's mark, which the next one-bucket request that would queue takes
// when it covers its cost at its lateness after now, which a charge pays
// first, which lapses as the bucket refills, and which a pause holds back.
var creditCase = decisionCase{
	name:    "credit",
	buckets: []store.Bucket{{Key: "p", Rule: "p", Interval: 10 * time.Millisecond, Burst: 5, Lateness: 10 * time.Millisecond, Corrected: true}},
	steps: []decisionStep{
		{op: "reserve", buckets: []int{0}, costs: []int64{5}, maxWait: time.Second, want: wait(0)},                      // 0: TAT +50ms
		{op: "reserve", buckets: []int{0}, costs: []int64{5}, maxWait: time.Second, want: wait(50 * time.Millisecond)},  // 1: TAT +100ms
		{op: "reserve", buckets: []int{0}, costs: []int64{5}, maxWait: time.Second, want: wait(100 * time.Millisecond)}, // 2: TAT +150ms
		{advance: 2 * time.Millisecond, op: "charge", buckets: []int{0}, units: -3, of: 0},                              // credit 3, mark +50ms
		{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(0)},                                         // 4: on credit, 2 left
		{op: "reserve", buckets: []int{0}, costs: []int64{3}, maxWait: time.Second, want: wait(128 * time.Millisecond)}, // 5: 2 < 3: queues
		{op: "charge", buckets: []int{0}, units: 1, of: 4},                                                              // paid by credit: 1 left
		{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(0)},                                         // 7: on credit, none left
		{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(138 * time.Millisecond)},                    // 8: queues
		{advance: 30 * time.Millisecond, op: "charge", buckets: []int{0}, units: -4, of: 1},                             // credit 4, mark +100ms
		{advance: 40 * time.Millisecond, op: "reserve", buckets: []int{0}, costs: []int64{4}, maxWait: time.Second},     // 10: lapsed to 1 at +82ms
		{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(0)},                                         // 11: on credit
		{op: "charge", buckets: []int{0}, units: -1, of: 11},                                                            // 12: back to the credit
		{op: "pause", buckets: []int{0}, pause: 50 * time.Millisecond},
		{op: "reserve", buckets: []int{0}, maxWait: time.Second}, // 14: held: queues
		{op: "refund", of: 4},                                                     // a credit booking gives nothing back
		{op: "reserve", buckets: []int{0}, maxWait: 0},                            // 16: no credit within a pause
		{advance: time.Second, op: "charge", buckets: []int{0}, units: -2, of: 2}, // a full bucket takes nothing
		{op: "reserve", buckets: []int{0}, costs: []int64{5}, maxWait: 0, want: wait(0)},
		{op: "reserve", buckets: []int{0}, maxWait: time.Second, want: wait(10 * time.Millisecond)},
	},
}

// TestRedisStoreSameDecisionsAsLocal runs each sequence through the local store
// (fake clock) and the Redis store (the same times passed as the scripts'
// now) and requires the same ok, wait and limiter at every step.
func TestRedisStoreSameDecisionsAsLocal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for _, tc := range decisionCases {
		t.Run(tc.name, func(t *testing.T) {
			runDecisions(t, rdb, tc.buckets, tc.steps)
		})
	}
}

// runDecisions runs steps through a local and a Redis store on rdb and
// compares them.
func runDecisions(t *testing.T, rdb redis.UniversalClient, buckets []store.Bucket, steps []decisionStep, opts ...func(*redisstore.Options)) {
	t.Helper()
	ctx := redisCtx(t)
	start := time.Unix(1_700_000_000, 0)
	lclk, rclk := fakeclock.New(start), fakeclock.New(start)
	local := newLocalStore(lclk)
	remote := redisStoreAt(rdb, testNamespace(t), rclk, opts...)
	lres := make([]store.Reservation, len(steps))
	rres := make([]store.Reservation, len(steps))
	for i, st := range steps {
		lclk.Advance(st.advance)
		rclk.Advance(st.advance)
		var bs []store.Bucket
		for j, bi := range st.buckets {
			b := buckets[bi]
			b.Cost = 1
			if st.costs != nil {
				b.Cost = st.costs[j]
			}
			if st.sent != nil {
				b.Sent = st.sent[j]
			}
			bs = append(bs, b)
		}
		switch st.op {
		case "reserve":
			l, err := local.Reserve(ctx, bs, st.maxWait)
			if err != nil {
				t.Fatalf("step %d: local reserve: %v", i, err)
			}
			r, err := remote.Reserve(ctx, bs, st.maxWait)
			if err != nil {
				t.Fatalf("step %d: redis reserve: %v", i, err)
			}
			lres[i], rres[i] = l, r
			if l.OK != r.OK || l.Limiter != r.Limiter || (l.Wait-r.Wait).Abs() > time.Microsecond {
				t.Errorf("step %d: redis ok=%v wait=%v limiter=%d, local ok=%v wait=%v limiter=%d",
					i, r.OK, r.Wait, r.Limiter, l.OK, l.Wait, l.Limiter)
			}
			if st.want != nil && (l.Wait-*st.want).Abs() > time.Microsecond {
				t.Errorf("step %d: wait %v, want %v", i, l.Wait, *st.want)
			}
			for j := range bs {
				if l.Count(j) != r.Count(j) {
					t.Errorf("step %d: bucket %d counted %d in Redis, %d locally", i, j, r.Count(j), l.Count(j))
				}
			}
		case "refund":
			if err := lres[st.of].Cancel(ctx); err != nil {
				t.Fatalf("step %d: local refund: %v", i, err)
			}
			if err := rres[st.of].Cancel(ctx); err != nil {
				t.Fatalf("step %d: redis refund: %v", i, err)
			}
		case "pause":
			if err := local.Pause(ctx, bs, st.pause); err != nil {
				t.Fatalf("step %d: local pause: %v", i, err)
			}
			if err := remote.Pause(ctx, bs, st.pause); err != nil {
				t.Fatalf("step %d: redis pause: %v", i, err)
			}
		case "charge":
			mark := func(r store.Reservation) int64 {
				if len(r.Marks) == 0 {
					return 0
				}
				return r.Marks[0]
			}
			if err := local.Charge(ctx, bs[0], st.units, mark(lres[st.of])); err != nil {
				t.Fatalf("step %d: local charge: %v", i, err)
			}
			if err := remote.Charge(ctx, bs[0], st.units, mark(rres[st.of])); err != nil {
				t.Fatalf("step %d: redis charge: %v", i, err)
			}
		case "limit":
			if _, err := local.Limit(ctx, bs[0], st.cap); err != nil {
				t.Fatalf("step %d: local limit: %v", i, err)
			}
			if _, err := remote.Limit(ctx, bs[0], st.cap); err != nil {
				t.Fatalf("step %d: redis limit: %v", i, err)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, st.op)
		}
	}
}

// TestRedisNamespaces checks that namespaces separate buckets and that an
// invalid one is a configuration error naming it.
func TestRedisNamespaces(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rule := Rule{Name: "r", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 1}}
	newT := func(opts ...Option) *Transport {
		return mustNew(t, okBase, append([]Option{sharedRedis(rdb), WithRules(rule), WithoutWaiting()}, opts...)...)
	}
	send := func(tr *Transport) error {
		return roundTrip(tr, newReq(t, redisCtx(t), http.MethodGet, "http://example.com/"))
	}
	for name, tr := range map[string]*Transport{
		"default":  newT(),
		"prod":     newT(WithNamespace("prod")),
		"staging":  newT(WithNamespace("staging")),
		"reversed": mustNew(t, okBase, WithNamespace("reversed"), WithRules(rule), WithoutWaiting(), WithRedis(rdb)),
	} {
		if err := send(tr); err != nil {
			t.Errorf("%s: first request: %v", name, err)
		}
	}
	// The second request of the same namespace finds the bucket spent,
	// whatever the order of the options.
	if err := send(mustNew(t, okBase, WithRules(rule), WithoutWaiting(), WithNamespace("reversed"), WithRedis(rdb), WithRedisTimeout(redisTestTimeout))); !errors.Is(err, ErrBeyondMaxWait) {
		t.Errorf("second request in namespace reversed: %v, want ErrBeyondMaxWait", err)
	}
	keys, err := rdb.Keys(redisCtx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 8 {
		t.Errorf("keys = %q, want one bucket and one replica set per namespace", keys)
	}

	for _, ns := range []string{"", "a{b", "a}b"} {
		_, err := New(okBase, WithRedis(rdb), WithNamespace(ns), WithRules(rule))
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != "WithNamespace" || !strings.Contains(err.Error(), fmt.Sprintf("%q", ns)) {
			t.Errorf("namespace %q: err = %v, want one naming it", ns, err)
		}
	}
	if _, err := New(okBase, WithRedis(nil)); err == nil {
		t.Errorf("WithRedis(nil) accepted")
	}
	// Options without a client keep the store local.
	tr := mustNew(t, okBase, WithNamespace("x"), WithHashTagPerKey(), WithRules(rule))
	if _, ok := tr.store.(*localstore.Store); !ok {
		t.Errorf("store without WithRedis is %T, want *localstore.Store", tr.store)
	}
	fs, _ := mustNew(t, okBase, WithRedis(rdb), WithRules(rule)).store.(*outage.Store)
	rs, ok := (*redisstore.Store)(nil), false
	if fs != nil {
		rs, ok = fs.Primary().(*redisstore.Store)
	}
	if !ok || rs.Namespace() != "default" {
		t.Errorf("default store %#v, want a Redis store in the documented namespace \"default\"", rs)
	}
}

// TestRedisRejectsRulesBeyondResolution checks the rules the Redis store
// refuses at construction.
func TestRedisRejectsRulesBeyondResolution(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		name  string
		limit Limit
		field string
	}{
		{"sub-microsecond", Limit{Rate: 2_000_000, Period: time.Second, Burst: 1}, "Limit.Rate"},
		{"span beyond 2^49 µs", Limit{Rate: 1, Period: 20 * 365 * 24 * time.Hour, Burst: 1}, "Limit.Period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(okBase, WithRedis(rdb), WithHeadroom(0), WithRules(Rule{Name: tc.name, Limit: tc.limit}))
			var re *RuleError
			if !errors.As(err, &re) || re.Rule != tc.name || re.Field != tc.field {
				t.Fatalf("err = %v, want a RuleError for %q field %s", err, tc.name, tc.field)
			}
		})
	}
	// The same rules are fine locally.
	if _, err := New(okBase, WithHeadroom(0), WithRules(Rule{Name: "fast", Limit: Limit{Rate: 2_000_000, Period: time.Second, Burst: 1}})); err != nil {
		t.Fatalf("local: %v", err)
	}
}

// TestRedisTransportShared sends requests through two Transports sharing a
// bucket in Redis to a real server: together they keep the rule.
func TestRedisTransportShared(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	arrivals := make(chan time.Time, 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals <- time.Now()
	}))
	t.Cleanup(ts.Close)
	ns := WithNamespace(testNamespace(t))

	t.Run("no wait", func(t *testing.T) {
		rule := Rule{Name: "hourly", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 3}}
		a := mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithoutWaiting())
		b := mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithoutWaiting())
		admitted := 0
		for i := range 8 {
			tr := []*Transport{a, b}[i%2]
			err := roundTrip(tr, newReq(t, redisCtx(t), http.MethodGet, ts.URL))
			var we *WaitError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &we) && we.Rule == "hourly" && we.Wait > 40*time.Minute:
			default:
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if admitted != 3 {
			t.Fatalf("admitted %d, want the burst of 3", admitted)
		}
		drain(arrivals, 3)
	})

	t.Run("waits", func(t *testing.T) {
		const n, iv = 8, 50 * time.Millisecond
		rule := Rule{Name: "fast", Limit: Limit{Rate: 20, Period: time.Second, Burst: 1}}
		a := mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithHeadroom(0))
		b := mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithHeadroom(0))
		first := sendConcurrently(t, []*Transport{a, b}, ts.URL, n)
		checkSpacing(t, first, collect(arrivals, n), iv)
	})
}

// sendConcurrently sends n requests through trs in turn, concurrently, and
// returns the time just before the first was sent. It fails t if any
// request fails.
func sendConcurrently(t *testing.T, trs []*Transport, url string, n int) time.Time {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- roundTrip(trs[i%len(trs)], newReq(t, context.Background(), http.MethodGet, url))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("request: %v", err)
		}
	}
	return start
}

// checkSpacing requires the k-th arrival (in order) no earlier than
// start + k·iv: each request departs at its slot or later. Slots are timed
// by Redis's wall clock and arrivals by this process's monotonic clock,
// which a time daemon slewing the wall clock on a VM makes disagree by
// milliseconds over a second, hence half an interval of slack: two
// Transports keeping separate buckets would be early by whole intervals.
func checkSpacing(t *testing.T, start time.Time, arrivals []time.Time, iv time.Duration) {
	t.Helper()
	slack := iv / 2
	sortTimes(arrivals)
	for k, at := range arrivals {
		if earliest := start.Add(time.Duration(k)*iv - slack); at.Before(earliest) {
			t.Errorf("arrival %d at +%v, before its slot at +%v", k, at.Sub(start), time.Duration(k)*iv)
		}
	}
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

func collect(ch <-chan time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		out = append(out, <-ch)
	}
	return out
}

func drain(ch <-chan time.Time, n int) { _ = collect(ch, n) }

// skewedClock is the system clock shifted by off: its Now is wrong, its
// timers run at the right speed.
type skewedClock struct{ off time.Duration }

func (c skewedClock) Now() time.Time                 { return time.Now().Add(c.off) }
func (c skewedClock) NewTimer(d time.Duration) Timer { return systemClock{}.NewTimer(d) }

// TestRedisSkewedReplicas runs two Transports whose clocks are 2 s ahead
// and 2 s behind: Redis's clock decides, so they share the bucket exactly
// as two unskewed ones do. With their own clocks, the one behind would see
// the other's bookings 4 s in the future and wait for them.
func TestRedisSkewedReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	arrivals := make(chan time.Time, 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals <- time.Now()
	}))
	t.Cleanup(ts.Close)

	run := func(t *testing.T, ns string, offA, offB time.Duration) (admitted int, waits []time.Duration) {
		hourly := Rule{Name: "hourly", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 3}}
		opts := []Option{sharedRedis(rdb), WithNamespace(ns), WithRules(hourly), WithoutWaiting()}
		a := mustNew(t, nil, append(opts, WithClock(skewedClock{offA}))...)
		b := mustNew(t, nil, append(opts, WithClock(skewedClock{offB}))...)
		for i := range 6 {
			err := roundTrip([]*Transport{a, b}[i%2], newReq(t, redisCtx(t), http.MethodGet, ts.URL))
			var we *WaitError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &we):
				waits = append(waits, we.Wait)
			default:
				t.Fatalf("request %d: %v", i, err)
			}
		}
		drain(arrivals, admitted)

		// Waiting requests: a budget of 1.5 s leaves no room for a 4 s
		// skew.
		const n, iv = 6, 50 * time.Millisecond
		fast := Rule{Name: "fast", Limit: Limit{Rate: 20, Period: time.Second, Burst: 1}}
		opts = []Option{sharedRedis(rdb), WithNamespace(ns), WithRules(fast), WithMaxWait(1500 * time.Millisecond), WithHeadroom(0)}
		a = mustNew(t, nil, append(opts, WithClock(skewedClock{offA}))...)
		b = mustNew(t, nil, append(opts, WithClock(skewedClock{offB}))...)
		start := sendConcurrently(t, []*Transport{a, b}, ts.URL, n)
		checkSpacing(t, start, collect(arrivals, n), iv)
		return admitted, waits
	}
	skewA, skewW := run(t, testNamespace(t)+"-skewed", 2*time.Second, -2*time.Second)
	evenA, evenW := run(t, testNamespace(t)+"-even", 0, 0)
	if skewA != 3 || evenA != 3 {
		t.Fatalf("admitted %d skewed, %d unskewed, want 3 each", skewA, evenA)
	}
	for i := range skewW {
		// The same position in the queue: the waits differ by the real
		// time between the runs, never by the 2 s skew.
		if d := (skewW[i] - evenW[i]).Abs(); d > time.Second {
			t.Errorf("rejection %d: wait %v skewed, %v unskewed", i, skewW[i], evenW[i])
		}
	}
}

// commandStats returns the calls of the named commands in INFO
// commandstats.
func commandStats(t *testing.T, ctx context.Context, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := make(map[string]int)
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// TestRedisOneScriptCallPerRequest counts script calls in INFO
// commandstats for requests matched by three rules.
func TestRedisOneScriptCallPerRequest(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	lim := Limit{Rate: 1000, Period: time.Second, Burst: 100}
	tr := mustNew(t, okBase, sharedRedis(rdb), WithNamespace(testNamespace(t)), WithRules(
		Rule{Name: "global", Limit: lim},
		Rule{Name: "per-account", Limit: lim, Key: KeyHeader("Authorization")},
		Rule{Name: "writes", Limit: lim, Match: Match{Methods: []string{"POST"}}, Key: KeyHeader("Authorization")},
	))
	send := func() {
		t.Helper()
		if err := roundTrip(tr, newReq(t, ctx, http.MethodPost, "http://api.example.com/v1", "Authorization", "Bearer secret")); err != nil {
			t.Fatal(err)
		}
	}
	send() // loads the script: EVALSHA, NOSCRIPT, EVAL
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		send()
	}
	calls := commandStats(t, ctx, rdb)
	if got := calls["evalsha"] + calls["eval"]; got != n {
		t.Fatalf("%d script calls for %d requests (commandstats %v)", got, n, calls)
	}
	if calls["get"] != 3*n || calls["set"] != 3*n {
		t.Errorf("GET %d, SET %d inside the scripts, want %d each", calls["get"], calls["set"], 3*n)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// The three buckets and the replica set the heartbeat rides in with
	// the first request (at most one a second: none of the five above
	// may have made a call of its own).
	if len(keys) != 4 {
		t.Errorf("keys %q, want 3 buckets and the replica set", keys)
	}
	for _, k := range keys {
		if strings.Contains(k, "secret") {
			t.Errorf("key %q holds the raw partition key", k)
		}
	}
}

// TestRedisCluster runs the decision sequences on a 3-master Cluster, checks
// that the keys of one request share a node, and that WithHashTagPerKey
// spreads partitioned buckets over the masters while split requests keep
// the same decisions as the local store. The Redis store's own Cluster checks
// are internal/redisstore's TestCluster.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := redisCtx(t)

	t.Run("same decisions", func(t *testing.T) {
		for _, tc := range decisionCases {
			t.Run(tc.name, func(t *testing.T) {
				runDecisions(t, rdb, tc.buckets, tc.steps)
			})
		}
	})

	lim := Limit{Rate: 1000, Period: time.Second, Burst: 100}
	rules := WithRules(
		Rule{Name: "global", Limit: lim},
		Rule{Name: "per-account", Limit: lim, Key: KeyHeader("Authorization")},
		Rule{Name: "writes", Limit: lim, Match: Match{Methods: []string{"POST"}}, Key: KeyHeader("Authorization")},
	)
	keysOf := func(t *testing.T, ns string) []string {
		t.Helper()
		var (
			mu   sync.Mutex // ForEachMaster calls concurrently
			keys []string
		)
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			ks, err := m.Keys(ctx, "*{"+ns+"*").Result()
			mu.Lock()
			keys = append(keys, ks...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}

	t.Run("one request one node", func(t *testing.T) {
		ns := testNamespace(t)
		tr := mustNew(t, okBase, sharedRedis(rdb), WithNamespace(ns), rules)
		for i := range 5 {
			if err := roundTrip(tr, newReq(t, ctx, http.MethodPost, "http://api.example.com/", "Authorization", "acct-"+strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		keys := keysOf(t, ns)
		if len(keys) != 12 {
			t.Fatalf("keys %q, want 1 global + 5×2 per account + the replica set", keys)
		}
		owner := cl.MasterForKey(keys[0])
		for _, k := range keys {
			if cl.MasterForKey(k) != owner {
				t.Fatalf("key %s not on %s with %s", k, owner.Addr(), keys[0])
			}
		}
	})

	t.Run("hash tag per key spreads", func(t *testing.T) {
		ns := testNamespace(t)
		tr := mustNew(t, okBase, sharedRedis(rdb), WithNamespace(ns), WithHashTagPerKey(), rules)
		for i := range 30 {
			if err := roundTrip(tr, newReq(t, ctx, http.MethodPost, "http://api.example.com/", "Authorization", "acct-"+strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		keys := keysOf(t, ns)
		if len(keys) != 62 {
			t.Fatalf("%d keys, want 1 global + 30×2 per account + the replica set", len(keys))
		}
		masters := make(map[string]int)
		for _, k := range keys {
			masters[cl.MasterForKey(k).Addr()]++
		}
		if len(masters) != 3 {
			t.Fatalf("keys spread over %v, want all 3 masters", masters)
		}
		t.Logf("62 keys over the masters: %v", masters)
	})

	t.Run("split requests", func(t *testing.T) {
		g := store.Bucket{Key: "g", Rule: "g", Interval: 10 * time.Millisecond, Burst: 1}
		acct := store.Bucket{Key: "acct:" + hashKey("x"), Rule: "acct", Interval: 100 * time.Millisecond, Burst: 1}
		// internal/redisstore's TestCluster checks that g and acct fall in
		// different slots.
		perKey := func(o *redisstore.Options) { o.TagPerKey = true }
		for _, tc := range []struct {
			name  string
			steps []decisionStep
		}{
			{"later group rebooks the earlier one", []decisionStep{
				{op: "reserve", buckets: []int{1}, maxWait: time.Second},
				// acct sets the departure after g was booked at now:
				// g must be booked again at acct's departure.
				{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
				{op: "reserve", buckets: []int{0}, maxWait: time.Second},
			}},
			{"earlier group sets the departure", []decisionStep{
				{op: "reserve", buckets: []int{0}, maxWait: time.Second},
				{op: "reserve", buckets: []int{0}, maxWait: time.Second},
				{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
				{op: "reserve", buckets: []int{1}, maxWait: time.Second},
			}},
			{"rejection rolls the earlier group back", []decisionStep{
				{op: "reserve", buckets: []int{1}, maxWait: time.Second},
				{op: "reserve", buckets: []int{1}, maxWait: time.Second},
				// acct needs 200ms: rejected after g was booked.
				{op: "reserve", buckets: []int{0, 1}, maxWait: 50 * time.Millisecond},
				{op: "reserve", buckets: []int{0}, maxWait: 0},
				{op: "reserve", buckets: []int{1, 0}, maxWait: 50 * time.Millisecond},
				{op: "reserve", buckets: []int{0}, maxWait: 0},
			}},
			{"refund and pause of a split request", []decisionStep{
				{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
				{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
				{op: "refund", of: 1},
				{op: "reserve", buckets: []int{0, 1}, maxWait: time.Second},
				{op: "pause", buckets: []int{0, 1}, pause: time.Second},
				{op: "reserve", buckets: []int{1, 0}, maxWait: 2 * time.Second},
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				runDecisions(t, rdb, []store.Bucket{g, acct}, tc.steps, perKey)
			})
		}
	})
}

// TestRedisTLSAndACL runs the shared bucket through a TLS-only server as an
// ACL user limited to the throttle keys and the commands the scripts need
// (the configuration docs/REDIS.md shows), and checks that the user can do
// nothing else.
func TestRedisTLSAndACL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithTLS(), redistest.WithACL(
		"user throttle on >fleet-password resetkeys ~throttle:* resetchannels -@all +evalsha +eval +get +set +time +zadd +zremrangebyscore +zcard +pexpire",
	))
	rdb := srv.ClientAs(t, "throttle", "fleet-password")
	ctx := redisCtx(t)
	// Dial and shake hands before the first request: under the race
	// detector a TLS handshake alone can outlast the 50 ms Redis timeout, which
	// would send the first requests to the local fallback.
	if err := rdb.Time(ctx).Err(); err != nil { // the user may TIME, not PING
		t.Fatal(err)
	}

	rule := Rule{Name: "hourly", Limit: Limit{Rate: 1, Period: time.Hour, Burst: 2}}
	a := mustNew(t, okBase, sharedRedis(rdb), WithNamespace("tls"), WithRules(rule), WithoutWaiting())
	b := mustNew(t, okBase, sharedRedis(rdb), WithNamespace("tls"), WithRules(rule), WithoutWaiting())
	for i, want := range []error{nil, nil, ErrBeyondMaxWait, ErrBeyondMaxWait} {
		err := roundTrip([]*Transport{a, b}[i%2], newReq(t, ctx, http.MethodGet, "http://example.com/"))
		if !errors.Is(err, want) && err != want {
			t.Fatalf("request %d: %v, want %v", i, err, want)
		}
	}
	// A command the user lacks would have sent the requests to the local
	// fallback, whose decisions here are the same.
	if a.Mode() != ModeShared || b.Mode() != ModeShared {
		t.Fatalf("modes %v, %v: the ACL user cannot run the scripts", a.Mode(), b.Mode())
	}
	s := redisstore.New(rdb, redisstore.Options{Namespace: "tls"})
	bs := []store.Bucket{{Key: "r", Rule: "r", Interval: time.Millisecond, Burst: 2, Cost: 1}}
	r, err := s.Reserve(ctx, bs, time.Second)
	if err != nil || !r.OK {
		t.Fatalf("reserve: %+v, %v", r, err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatalf("refund: %v", err)
	}
	if err := s.Pause(ctx, bs, time.Millisecond); err != nil {
		t.Fatalf("pause: %v", err)
	}

	for name, err := range map[string]error{
		"SET outside the prefix":            rdb.Set(ctx, "other:key", "1", 0).Err(),
		"script touching a key outside":     rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"other:key"}).Err(),
		"command outside the list":          rdb.Del(ctx, "throttle:{tls}:r").Err(),
		"script calling a command outside":  rdb.Eval(ctx, "return redis.call('DEL', KEYS[1])", []string{"throttle:{tls}:r"}).Err(),
		"script touching an undeclared key": rdb.Eval(ctx, "return redis.call('GET', 'other:key')", nil).Err(),
	} {
		// Redis words a refusal inside a script differently from NOPERM.
		if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't run") && !strings.Contains(err.Error(), "can't access") {
			t.Errorf("%s: err = %v, want an ACL refusal", name, err)
		}
	}
}
