package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// redisTestTimeout bounds every Redis call of these tests; generous because
// the machine is shared.
const redisTestTimeout = 20 * time.Second

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

// TestRedisStoreRedisClock checks the path that production takes: no
// explicit now, Redis's TIME decides.
func TestRedisStoreRedisClock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := New(srv.Client(t), Options{Namespace: testNamespace(t)})
	ctx := redisCtx(t)
	bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Hour, Burst: 2, Cost: 1}}
	for i, want := range []bool{true, true, false} {
		r, err := s.Reserve(ctx, bs, time.Minute)
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		if r.OK != want {
			t.Fatalf("reserve %d: ok = %v, want %v (wait %v)", i, r.OK, want, r.Wait)
		}
		if !r.OK && (r.Wait < 59*time.Minute || r.Wait > time.Hour) {
			t.Fatalf("reserve %d: wait %v, want just under an hour", i, r.Wait)
		}
	}
}

// TestRedisKeysAndTTL checks the key layout, that idle keys expire once
// their TAT has passed, and measures the memory of one idle bucket.
func TestRedisKeysAndTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	s := New(rdb, Options{Namespace: "ttl"})
	b := store.Bucket{Key: "stripe:" + hashKey("sk_live_secret"), Rule: "stripe", Interval: 200 * time.Millisecond, Burst: 3, Cost: 1}
	if _, err := s.Reserve(ctx, []store.Bucket{b}, time.Second); err != nil {
		t.Fatal(err)
	}
	key := "throttle:{ttl}:stripe:" + hashKey("sk_live_secret")
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != key {
		t.Fatalf("keys = %q, want [%q]", keys, key)
	}
	if strings.Contains(keys[0], "sk_live") {
		t.Fatalf("key %q holds the raw partition key", keys[0])
	}
	// TAT = now + 200ms after one request of a burst-3 bucket (an empty
	// bucket books at now), plus one second of slack.
	pttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > 1200*time.Millisecond {
		t.Fatalf("PTTL = %v, want in (0, 1.2s]", pttl)
	}
	mem, err := rdb.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMORY USAGE of one idle bucket key (%d-byte name): %d bytes", len(key), mem)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s still exists 10s later", key)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisMicros checks the conversions to the scripts' microseconds.
func TestRedisMicros(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d          time.Duration
		iv, up, dn int64
	}{
		{0, 0, 0, 0},
		{-time.Second, -1_000_000, 0, 0},
		{time.Nanosecond, 1, 1, 0},
		{time.Microsecond, 1, 1, 1},
		{1001 * time.Nanosecond, 2, 2, 1},
		{time.Duration(math.MaxInt64), math.MaxInt64/1000 + 1, MaxSpanMicros, MaxSpanMicros},
	} {
		if got := Micros(tc.d); got != tc.iv {
			t.Errorf("micros(%v) = %d, want %d", tc.d, got, tc.iv)
		}
		if got := spanMicros(tc.d, true); got != tc.up {
			t.Errorf("spanMicros(%v, up) = %d, want %d", tc.d, got, tc.up)
		}
		if got := spanMicros(tc.d, false); got != tc.dn {
			t.Errorf("spanMicros(%v, down) = %d, want %d", tc.d, got, tc.dn)
		}
	}
}

// strangeScripter answers every script call with a canned reply.
type strangeScripter struct {
	redis.UniversalClient
	reply any
}

func (s strangeScripter) Do(ctx context.Context, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(s.reply)
	return cmd
}

// ScriptLoad answers the store's warm-up (Store.warm) with an error, as
// a Redis that refuses SCRIPT would.
func (s strangeScripter) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx)
	cmd.SetErr(errors.New("strangeScripter: no SCRIPT LOAD"))
	return cmd
}

// TestRedisStrangeReplies checks that replies of an unexpected shape are
// errors, never panics.
func TestRedisStrangeReplies(t *testing.T) {
	t.Parallel()
	bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Millisecond, Burst: 1, Cost: 1}}
	for _, tc := range []struct {
		name  string
		reply any
	}{
		{"nil", nil},
		{"array", []any{int64(1), int64(0), int64(0), int64(1), int64(2)}},
		{"empty", ""},
		{"OK", "OK"},
		{"short", "1 0"},
		{"flag not 0 or 1", "2 0 0 1 2"},
		{"limiter out of range", "0 5 3"},
		{"negative wait", "0 -5 0"},
		{"missing TATs", "1 0 0"},
		{"missing booked", "1 0 0 1"},
		{"TAT not int", "1 0 0 x 2"},
		{"missing count", "1 0 0 0 1 2"},
		{"count not int", "1 0 0 0 1 2 x"},
		{"extra values", "1 0 0 0 1 2 3 4"},
		{"rejection with extra values", "0 5 0 0 1"},
		{"rejection without held", "0 5 0"},
		{"held not int", "0 5 0 x"},
		{"trailing space", "0 5 0 "},
		{"double space", "0  5 0"},
		{"overflow", "0 99999999999999999999 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(strangeScripter{reply: tc.reply}, Options{Namespace: "x"})
			if _, err := s.Reserve(context.Background(), bs, time.Second); !errors.Is(err, errRedisReply) {
				t.Fatalf("err = %v, want errRedisReply", err)
			}
		})
	}
}

// TestRedisNoScript flushes the script cache, then restarts the server,
// mid-run: the store loads its scripts again without surfacing an error
// once Redis answers.
func TestRedisNoScript(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := New(rdb, Options{Namespace: testNamespace(t)})
	ctx := redisCtx(t)
	bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Microsecond, Burst: 1000, Cost: 1}}
	all := func(what string) {
		t.Helper()
		r, err := s.Reserve(ctx, bs, time.Second)
		if err != nil {
			t.Fatalf("reserve %s: %v", what, err)
		}
		if err := r.Cancel(ctx); err != nil {
			t.Fatalf("refund %s: %v", what, err)
		}
		if err := s.Pause(ctx, bs, 0); err != nil {
			t.Fatalf("pause %s: %v", what, err)
		}
	}
	all("before")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	all("after SCRIPT FLUSH")
	srv.Restart()
	// go-redis retries a command whose pooled connection died (MaxRetries
	// 3 by default), so even the first call after the restart succeeds.
	all("after restart")
	all("again")
}

// TestRedisHeldReported: a pause set by one replica is kept in the bucket
// and reported to any other that books it before it ends, through refunds
// and adaptations, and no more once it has ended.
func TestRedisHeldReported(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := redisCtx(t)
	ns := testNamespace(t)
	a := New(rdb, Options{Namespace: ns})
	b := New(rdb, Options{Namespace: ns})
	one := []store.Bucket{{Key: "g", Rule: "g", Interval: time.Millisecond, Burst: 5, Cost: 1}}
	two := []store.Bucket{one[0], {Key: "e", Rule: "e", Interval: time.Millisecond, Burst: 5, Cost: 1}}

	if r, err := b.Reserve(ctx, two, time.Second); err != nil || !r.OK || r.Held != 0 {
		t.Fatalf("before any pause: %+v, %v; want booked, held 0", r, err)
	}
	const pause = 400 * time.Millisecond
	if err := a.Pause(ctx, one, pause); err != nil {
		t.Fatal(err)
	}
	check := func(what string, bs []store.Bucket, maxWait time.Duration) store.Reservation {
		t.Helper()
		r, err := b.Reserve(ctx, bs, maxWait)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.Held <= 0 || r.Held > pause {
			t.Errorf("%s: held %v, want the pause's remaining part of %v", what, r.Held, pause)
		}
		return r
	}
	r := check("one bucket, booked", one, time.Second)
	if r.Wait < r.Held {
		t.Errorf("booked at %v, inside the pause that ends in %v", r.Wait, r.Held)
	}
	check("one bucket, rejected", one, 0)
	check("two buckets, one paused", two, time.Second)
	// A refund and a cap keep the hold in the bucket, and hold.lua reads it.
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Limit(ctx, one[0], store.Cap{Rate: 5, Span: time.Second}); err != nil {
		t.Fatal(err)
	}
	check("after a refund and a cap", one, 0)
	if h, err := b.Held(ctx, two); err != nil || h <= 0 || h > pause {
		t.Errorf("held = %v, %v; want the pause's remaining part of %v", h, err, pause)
	}

	time.Sleep(pause)
	if r, err := b.Reserve(ctx, two, 2*time.Second); err != nil || r.Held != 0 {
		t.Errorf("after the pause: %+v, %v; want held 0", r, err)
	}
}

// TestRedisStoreTimeout: with Redis stopped (SIGSTOP), every call of the
// Redis store returns within its timeout (WithRedisTimeout), marked as
// store.ErrTimeout, though the caller's context has no deadline. Reserve
// keeps it with a client that ignores deadlines too (the batcher's guard);
// the other calls need a client that honours them (the outage store guards
// them otherwise).
func TestRedisStoreTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	bound := timeout + 400*time.Millisecond // the machine is shared, and -race
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name     string
		ctxAware bool
		ops      []string
	}{
		{"ContextTimeoutEnabled", true, []string{"reserve", "cancel", "pause", "limit", "held"}},
		{"client ignores deadlines", false, []string{"reserve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := srv.Options()
			opt.ContextTimeoutEnabled = tc.ctxAware
			opt.MaxRetries = -1
			rdb := srv.ClientWith(t, opt)
			rt := store.NewTimeout(timeout)
			// Not the cold bound of a first call (store.Timeout.For).
			rt.MarkWarm()
			for _, call := range []string{store.CallRefund, store.CallPause, store.CallLimit, store.CallHold} {
				rt.Answered(call)
			}
			s := New(rdb, Options{Namespace: testNamespace(t), Timeout: rt, Guard: !tc.ctxAware})
			ctx := context.Background()
			b := undoBucket
			r, err := s.Reserve(ctx, []store.Bucket{b}, time.Hour)
			if err != nil || !r.OK {
				t.Fatalf("reserve before the stall: %+v, %v", r, err)
			}
			srv.Pause()
			for _, op := range tc.ops {
				start := time.Now()
				switch op {
				case "reserve":
					_, err = s.Reserve(ctx, []store.Bucket{b}, time.Hour)
				case "cancel":
					err = r.Cancel(ctx)
				case "pause":
					err = s.Pause(ctx, []store.Bucket{b}, time.Second)
				case "limit":
					_, err = s.Limit(ctx, b, store.Cap{Rate: 1, Span: time.Second})
				case "held":
					_, err = s.Held(ctx, []store.Bucket{b})
				}
				took := time.Since(start)
				if !errors.Is(err, store.ErrTimeout) {
					t.Errorf("%s: err %v, want store.ErrTimeout", op, err)
				}
				if took > bound {
					t.Errorf("%s took %v against a stalled Redis, timeout %v", op, took, timeout)
				}
			}
			srv.Resume()
		})
	}
}

// hashKey hashes a partition key as the root does (rule.go's hashKey):
// the store sees only the hash.
func hashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:16])
}

// fbEpoch is the fake clocks' start, as in the root's outage tests.
var fbEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// undoBucket refills one slot every 100 ms, a burst of one.
var undoBucket = store.Bucket{Key: "undo", Rule: "undo", Interval: 100 * time.Millisecond, Burst: 1, Cost: 1}

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

// systemClock is the Clock of package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// TestCluster checks, on a 3-master Cluster, that concurrent requests of
// different tenants are batched per slot, and that with TagPerKey the
// buckets of one request may fall in different slots, each call group
// under one tag (the root's TestRedisCluster runs the decisions of such
// split requests).
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := redisCtx(t)

	t.Run("tenants batched per slot", func(t *testing.T) {
		g := newGate()
		gated := cl.Client(t)
		gated.AddHook(g)
		batchTenants(t, gated, g)
	})

	t.Run("split requests", func(t *testing.T) {
		g := store.Bucket{Key: "g", Rule: "g", Interval: 10 * time.Millisecond, Burst: 1}
		acct := store.Bucket{Key: "acct:" + hashKey("x"), Rule: "acct", Interval: 100 * time.Millisecond, Burst: 1}
		s := New(rdb, Options{Namespace: "n", TagPerKey: true})
		if k1, k2 := s.key(&g), s.key(&acct); !s.split || len(s.groups([]store.Bucket{g, acct})) != 2 || cl.MasterForKey(k1) == cl.MasterForKey(k2) && rdb.ClusterKeySlot(ctx, k1).Val() == rdb.ClusterKeySlot(ctx, k2).Val() {
			t.Fatalf("buckets %s and %s are not split", k1, k2)
		}
	})
}
