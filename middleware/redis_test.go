package middleware_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/middleware"
)

// redisRule is the rule of the Redis tests: 10 a minute, all at once.
var redisRule = throttle.Rule{Name: "shared", Limit: throttle.Limit{Rate: 10, Period: time.Minute, Burst: 10}, Key: middleware.APIKey("Authorization")}

func keyed() *http.Request { return get("/", "Authorization", "Bearer sk_test_redis") }

// TestRedisShared: two Limiters (two replicas) on one Redis share their
// buckets, and no raw key reaches Redis.
func TestRedisShared(t *testing.T) {
	srv := redistest.Start(t)
	a := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithRules(redisRule))
	b := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithRules(redisRule))
	got := append(statuses(a, 6, keyed), statuses(b, 6, keyed)...)
	if count(got, 200) != 10 || count(got, 429) != 2 {
		t.Errorf("statuses %v, want 10 admitted across both replicas", got)
	}
	w := serve(a, nil, keyed())
	if w.Header().Get("Retry-After") == "" || w.Header().Get("X-RateLimit-Limit") != "10" || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("refusal headers %v", w.Header())
	}
	keys, err := srv.Client(t).Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no key in Redis")
	}
	for _, k := range keys {
		if strings.Contains(k, "sk_test_redis") {
			t.Errorf("Redis key %q holds the raw API key", k)
		}
	}
}

// TestRedisOutage: with Redis killed, each outage mode does what it says,
// and none answers 5xx unless fail-closed was chosen.
func TestRedisOutage(t *testing.T) {
	tests := []struct {
		name     string
		opts     []middleware.Option
		admitted int
		status   int // of the refused, if any
	}{
		{"fail open admits all", []middleware.Option{middleware.WithOutageMode(throttle.ModeFailOpen)}, 12, 0},
		{"fail closed answers 503", []middleware.Option{middleware.WithOutageMode(throttle.ModeFailClosed)}, 0, http.StatusServiceUnavailable},
		{"fallback keeps limiting at its share", []middleware.Option{middleware.WithFleetShare(0.5)}, 5, http.StatusTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			opts := append([]middleware.Option{middleware.WithRedis(srv.Client(t)), middleware.WithRules(redisRule)}, tt.opts...)
			l := mustNew(t, opts...)
			if w := serve(l, nil, keyed()); w.Code != 200 {
				t.Fatalf("with Redis up: %d", w.Code)
			}
			srv.Kill()
			codes := statuses(l, 12, keyed)
			if n := count(codes, 200); n != tt.admitted {
				t.Errorf("admitted %d of 12 after the kill, want %d: %v", n, tt.admitted, codes)
			}
			for _, c := range codes {
				if c != 200 && c != tt.status {
					t.Errorf("status %d, want 200 or %d: %v", c, tt.status, codes)
				}
			}
			if tt.admitted == 12 {
				// Fail open keeps no room to tell: the policy, no count.
				w := serve(l, nil, keyed())
				if w.Header().Get("RateLimit-Policy") == "" || w.Header().Get("RateLimit") != "" || w.Header().Get("X-RateLimit-Remaining") != "" {
					t.Errorf("headers in the outage: %v", w.Header())
				}
			}
			if tt.status == http.StatusServiceUnavailable {
				d, err := l.Take(t.Context(), "", "sk_test_redis", 1)
				if !errors.Is(err, throttle.ErrStoreUnavailable) || d.Reason != middleware.ReasonUnavailable || d.Allowed {
					t.Errorf("Take in the outage: %+v, %v; want ErrStoreUnavailable", d, err)
				}
				w := serve(l, nil, keyed())
				if w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"unavailable"`) {
					t.Errorf("503: %v %s", w.Header(), w.Body)
				}
			}
		})
	}
}

// TestRedisQuota: through Redis, an admitted request's headers tell the
// room left, read from Redis, for every algorithm.
func TestRedisQuota(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range []throttle.Algorithm{throttle.LeakyBucket, throttle.TokenBucket, throttle.FixedWindow, throttle.SlidingLog, throttle.SlidingCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			burst := 5
			if alg >= throttle.FixedWindow {
				burst = 0
			}
			l := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithNamespace("quota-"+alg.String()), middleware.WithRules(throttle.Rule{
				Name: "r", Algorithm: alg, Limit: throttle.Limit{Rate: 5, Period: time.Hour, Burst: burst},
			}))
			for i := range 5 {
				w := serve(l, nil, get("/"))
				if w.Code != 200 {
					t.Fatalf("request %d: %d", i, w.Code)
				}
				if got, want := w.Header().Get("X-RateLimit-Remaining"), strconv.Itoa(4-i); got != want {
					t.Errorf("request %d: remaining %q, want %s", i, got, want)
				}
				if f := parseList(t, w.Header().Get("RateLimit")); len(f) != 1 || f[0].params["r"] != int64(4-i) || f[0].params["t"] < 1 {
					t.Errorf("request %d: RateLimit %v", i, f)
				}
			}
			if w := serve(l, nil, get("/")); w.Code != 429 || w.Header().Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("over the quota: %d %v", w.Code, w.Header())
			}
		})
	}
}

// TestRedisWithoutRoom: WithoutRedisRoom sends the policy and no count on
// an admitted request, and still the count (0) on a refusal.
func TestRedisWithoutRoom(t *testing.T) {
	srv := redistest.Start(t)
	l := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithoutRedisRoom(), middleware.WithRules(throttle.Rule{
		Name: "r", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1},
	}))
	w := serve(l, nil, get("/"))
	if w.Code != 200 || w.Header().Get("RateLimit-Policy") == "" || w.Header().Get("X-RateLimit-Remaining") != "" {
		t.Errorf("admitted: %d %v", w.Code, w.Header())
	}
	if w := serve(l, nil, get("/")); w.Code != 429 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("refused: %d %v", w.Code, w.Header())
	}
}

// TestRedisCluster: on a Redis Cluster with WithHashTagPerKey, each
// client's bucket lives on its own slot, requests of two rules are still
// decided all or nothing, and the room read reaches the right nodes.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	l := mustNew(t, middleware.WithRedis(c.Client(t)), middleware.WithHashTagPerKey(), middleware.WithRules(
		throttle.Rule{Name: "per-key", Limit: throttle.Limit{Rate: 3, Period: time.Hour, Burst: 3}, Key: middleware.APIKey("Authorization")},
		throttle.Rule{Name: "global", Limit: throttle.Limit{Rate: 100, Period: time.Hour, Burst: 100}},
	))
	for _, key := range []string{"a", "b", "c", "d"} {
		for i := range 4 {
			w := serve(l, nil, get("/", "Authorization", "Bearer "+key))
			want := 200
			if i == 3 {
				want = 429
			}
			if w.Code != want {
				t.Fatalf("key %s request %d: %d, want %d", key, i, w.Code, want)
			}
			if want == 200 {
				checkFields(t, "RateLimit", parseList(t, w.Header().Get("RateLimit")), []field{
					{"per-key", map[string]int64{"r": int64(2 - i)}},
					{"global", map[string]int64{"r": int64(100 - 3*strings.Index("abcd", key) - i - 1)}},
				})
			}
		}
	}
}

// TestRedisRoomBatched: the room reads of concurrent requests go to Redis
// together (internal/redisstore's quotaBatch) and each request still gets
// its own buckets' room: every client, sequential on its own, sees 4, 3,
// 2, 1, 0 left whatever the others do meanwhile.
func TestRedisRoomBatched(t *testing.T) {
	srv := redistest.Start(t)
	l := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithRules(throttle.Rule{
		Name: "r", Limit: throttle.Limit{Rate: 5, Period: time.Hour, Burst: 5}, Key: middleware.APIKey("Authorization"),
	}))
	const clients = 32
	got := make([][]string, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for range 5 {
				w := serve(l, nil, get("/", "Authorization", "Bearer client-"+strconv.Itoa(c)))
				got[c] = append(got[c], w.Header().Get("X-RateLimit-Remaining"))
			}
		})
	}
	wg.Wait()
	for c, g := range got {
		if strings.Join(g, ",") != "4,3,2,1,0" {
			t.Errorf("client %d saw %v, want 4,3,2,1,0", c, g)
		}
	}
}

// TestRedisConcurrency: with WithRedis a Concurrency caps the partition's
// requests across every replica: two Limiters on one Redis share the cap.
func TestRedisConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	rule := throttle.Rule{Name: "inflight", Concurrency: 1, Key: middleware.KeyHeader("X-Account")}
	a := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithRules(rule))
	b := mustNew(t, middleware.WithRedis(srv.Client(t)), middleware.WithRules(rule))
	entered, leave := make(chan struct{}), make(chan struct{})
	done := make(chan int)
	go func() {
		done <- serve(a, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(entered)
			<-leave
		}), get("/", "X-Account", "acct")).Code
	}()
	<-entered
	w := serve(b, nil, get("/", "X-Account", "acct"))
	if w.Code != 429 || !strings.Contains(w.Body.String(), "concurrency_limited") {
		t.Errorf("the other replica while the first is in flight: %d %s, want 429 concurrency_limited", w.Code, w.Body)
	}
	if w := serve(b, nil, get("/", "X-Account", "other")); w.Code != 200 {
		t.Errorf("another account: %d, want 200", w.Code)
	}
	close(leave)
	if code := <-done; code != 200 {
		t.Errorf("first: %d", code)
	}
	// A lease's release reaches Redis on a goroutine of its own (Release
	// waits for it 5 ms at most): the slot comes back, at the latest once
	// that call is done.
	for i := 0; ; i++ {
		w := serve(b, nil, get("/", "X-Account", "acct"))
		if w.Code == 200 {
			break
		}
		if i == 500 {
			t.Fatalf("after the first returned: %d, want 200", w.Code)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
