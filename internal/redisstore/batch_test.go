package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/redistest"
	"github.com/throttlekit/throttle/internal/store"
)

// pipelineCounter is a go-redis hook that records the pipelines sent and
// the largest (in commands).
type pipelineCounter struct {
	pipelines, largest atomic.Int64
}

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		for n := int64(len(cmds)); ; {
			old := h.largest.Load()
			if n <= old || h.largest.CompareAndSwap(old, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// batchClients are the two kinds of client the batcher serves: one that
// applies context deadlines to its sockets (the caller sends its own
// pipeline) and one that does not (the batcher guards the timeout with a
// goroutine per pipeline).
var batchClients = []struct {
	name     string
	ctxAware bool
}{
	{"ContextTimeoutEnabled", true},
	{"guarded", false},
}

// batchStore returns a Redis store whose client is of the given kind, with
// a few connections already dialled.
func batchStore(t *testing.T, srv *redistest.Server, ctxAware bool) (*Store, *redis.Client) {
	t.Helper()
	opt := srv.Options()
	opt.ContextTimeoutEnabled = ctxAware
	rdb := srv.ClientWith(t, opt)
	s := New(rdb, Options{Namespace: testNamespace(t), Guard: !ctxAware})
	dialConns(t, redisCtx(t), rdb)
	return s, rdb
}

// dialConns opens a few pooled connections, so that calls made while the
// server is paused (SIGSTOP) wait for its reply, not for a dial.
func dialConns(t *testing.T, ctx context.Context, rdb *redis.Client) {
	t.Helper()
	for range 4 {
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitInFlight waits until the batcher has n pipelines in flight.
func waitInFlight(t *testing.T, b *scriptBatcher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := b.inFlight
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pipelines in flight, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n calls are queued in the batcher.
func waitQueued(t *testing.T, b *scriptBatcher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.queue)
		b.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchQueuedCallsShareAScriptCall holds Redis still (SIGSTOP) while
// callers pile up behind the calls in flight, then lets it go: the queued
// requests leave together as one reserve_batch.lua call, and the bucket
// admits exactly its burst among them, NOSCRIPT included (the script cache
// is flushed first). Each queued request reports its wait in the queue
// (Reservation.Queued), at least the hold; those that went at once none.
func TestBatchQueuedCallsShareAScriptCall(t *testing.T) {
	t.Parallel()
	for _, tc := range batchClients {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, rdb := batchStore(t, srv, tc.ctxAware)
			ctx := redisCtx(t)
			<-s.warmed // its SCRIPT LOAD would otherwise race the flush
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Hour, Burst: 25, Cost: 1}}
			// More than maxBatchRequests: the queue goes as several
			// script calls in one pipeline.
			const callers = maxBatchRequests + 40
			srv.Pause()
			var wg sync.WaitGroup
			var admitted, rejected, queued, immediate atomic.Int64
			const hold = 20 * time.Millisecond
			call := func() {
				defer wg.Done()
				r, err := s.Reserve(ctx, bs, 0)
				switch {
				case err != nil:
					t.Errorf("reserve: %v", err)
				case r.OK:
					admitted.Add(1)
				default:
					rejected.Add(1)
				}
				switch {
				case r.Queued >= hold:
					queued.Add(1)
				case r.Queued == 0:
					immediate.Add(1)
				default:
					t.Errorf("queued %v: neither at once nor through the hold", r.Queued)
				}
			}
			wg.Add(callers)
			for range maxInFlight {
				go call()
			}
			waitInFlight(t, s.batch, maxInFlight)
			for range callers - maxInFlight {
				go call()
			}
			waitQueued(t, s.batch, callers-maxInFlight)
			time.Sleep(hold)
			srv.Resume()
			wg.Wait()
			if admitted.Load() != 25 || rejected.Load() != callers-25 {
				t.Errorf("admitted %d, rejected %d; want 25 and %d", admitted.Load(), rejected.Load(), callers-25)
			}
			if queued.Load() != callers-maxInFlight || immediate.Load() != maxInFlight {
				t.Errorf("%d reported a wait in the queue, %d none; want %d and %d", queued.Load(), immediate.Load(), callers-maxInFlight, maxInFlight)
			}
			stats := commandStats(t, ctx, rdb)
			// Every request read its bucket once; the booked ones wrote
			// it. The calls in flight ran alone, and each handed the queue
			// to a caller that sent what it found as script calls of at
			// most maxBatchRequests: a handful of script runs (TIMEs).
			if stats["get"] != callers || stats["set"] != 25 {
				t.Errorf("GET %d, SET %d: want %d and 25", stats["get"], stats["set"], callers)
			}
			if most := 2*maxInFlight + 2; stats["time"] > most {
				t.Errorf("%d script runs (TIME) for %d requests, want at most %d", stats["time"], callers, most)
			}
			if stats["eval"] < 2 {
				t.Errorf("%d EVAL after SCRIPT FLUSH: both scripts should have met NOSCRIPT", stats["eval"])
			}
			t.Logf("commandstats %v", stats)
		})
	}
}

// gate is a go-redis hook that holds every command until it is opened.
type gate struct {
	open chan struct{}
	held atomic.Int64
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.held.Add(1)
		<-g.open
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		<-g.open
		return next(ctx, cmds)
	}
}

// batchTenants queues the requests of three tenants (WithHashTagPerKey:
// one hash tag each) behind the calls in flight, held by a gate: the queue
// leaves as one pipeline of one script call per tenant, and each tenant's
// bucket admits exactly its burst.
func batchTenants(t *testing.T, rdb redis.UniversalClient, g *gate) {
	t.Helper()
	ctx := redisCtx(t)
	h := &pipelineCounter{}
	rdb.AddHook(h)
	s := New(rdb, Options{Namespace: testNamespace(t), TagPerKey: true})
	tenant := func(i int) []store.Bucket {
		return []store.Bucket{{Key: "acct:" + hashKey(string(rune('a'+i))), Rule: "acct", Interval: time.Hour, Burst: 5, Cost: 1}}
	}
	const perTenant = 12
	admitted := make([]atomic.Int64, 3)
	var wg sync.WaitGroup
	call := func(i int) {
		defer wg.Done()
		r, err := s.Reserve(ctx, tenant(i), 0)
		switch {
		case err != nil:
			t.Errorf("tenant %d: reserve: %v", i, err)
		case r.OK:
			admitted[i].Add(1)
		}
	}
	wg.Add(3 * perTenant)
	for i := range maxInFlight {
		go call(i)
	}
	waitInFlight(t, s.batch, maxInFlight)
	for j := maxInFlight; j < 3*perTenant; j++ {
		go call(j % 3)
	}
	waitQueued(t, s.batch, 3*perTenant-maxInFlight)
	close(g.open)
	wg.Wait()
	for i := range admitted {
		if got := admitted[i].Load(); got != 5 {
			t.Errorf("tenant %d: %d admitted, want its burst of 5", i, got)
		}
	}
	if got := h.largest.Load(); got != 3 {
		t.Errorf("largest pipeline of %d calls, want 3: one per tenant", got)
	}
}

// TestBatchTenants runs batchTenants on one node.
func TestBatchTenants(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	g := newGate()
	rdb.AddHook(g)
	batchTenants(t, rdb, g)
}

// TestBatchCallerGivesUpWhileQueued: a caller whose context ends while its
// call waits behind the pipelines in flight leaves at once, and its call is
// never sent.
func TestBatchCallerGivesUpWhileQueued(t *testing.T) {
	t.Parallel()
	for _, tc := range batchClients {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, _ := batchStore(t, srv, tc.ctxAware)
			ctx := redisCtx(t)
			bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Hour, Burst: 3, Cost: 1}}
			srv.Pause()
			var wg sync.WaitGroup
			wg.Add(maxInFlight)
			for range maxInFlight {
				go func() {
					defer wg.Done()
					if r, err := s.Reserve(ctx, bs, 0); err != nil || !r.OK {
						t.Errorf("reserve: %+v, %v", r, err)
					}
				}()
			}
			waitInFlight(t, s.batch, maxInFlight)
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.Reserve(short, bs, 0)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("queued reserve: %v, want the context's deadline", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("queued reserve returned after %v, long after its deadline", took)
			}
			srv.Resume()
			wg.Wait()
			// Burst 3: the two sent calls booked two; the abandoned one
			// booked nothing, so one slot is left.
			for i, want := range []bool{true, false} {
				r, err := s.Reserve(ctx, bs, 0)
				if err != nil || r.OK != want {
					t.Fatalf("reserve %d after: %+v, %v; want ok=%v", i, r, err, want)
				}
			}
		})
	}
}

// TestBatchCallerGivesUpAfterSend: with a client that ignores context
// deadlines, a caller leaves at its deadline, or at the store's timeout
// (the timer in its scriptCall), even though Redis holds its call; when
// Redis answers later, the slot booked for nobody is refunded.
func TestBatchCallerGivesUpAfterSend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout bool // the store's timeout ends the call, not the context
	}{{"context deadline", false}, {"store timeout", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testGivesUpAfterSend(t, tc.timeout)
		})
	}
}

func testGivesUpAfterSend(t *testing.T, timeout bool) {
	srv := redistest.Start(t)
	s, rdb := batchStore(t, srv, false)
	ctx := redisCtx(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Hour, Burst: 1, Cost: 1}}
	// A first call, so that a sender goroutine waits idle for the next.
	if r, err := s.Reserve(ctx, []store.Bucket{{Key: "b", Rule: "b", Interval: time.Hour, Burst: 1, Cost: 1}}, 0); err != nil || !r.OK {
		t.Fatalf("first reserve: %+v, %v", r, err)
	}
	srv.Pause()
	call, want := ctx, context.DeadlineExceeded
	if timeout {
		s.timeout = store.NewTimeout(100 * time.Millisecond)
		s.timeout.MarkWarm()
		want = store.ErrTimeout
	} else {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		call = short
	}
	start := time.Now()
	if _, err := s.Reserve(call, bs, 0); !errors.Is(err, want) {
		t.Fatalf("reserve on a paused Redis: %v, want %v", err, want)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("reserve returned after %v, long after its bound", took)
	}
	srv.Resume()
	// The late booking is refunded on a goroutine of its own: the bucket's
	// one slot comes back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := s.Reserve(ctx, bs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned booking was never refunded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBatchStress runs many callers with short, varied deadlines while
// Redis stalls now and then (SIGSTOP): callers give up queued, in flight
// or not at all. No caller is ever told it has a slot the bucket did not
// give it: the admitted never exceed the burst of a bucket that refills
// once an hour. The race detector and goleak (TestMain) watch the rest.
func TestBatchStress(t *testing.T) {
	t.Parallel()
	for _, tc := range batchClients {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s, _ := batchStore(t, srv, tc.ctxAware)
			ctx := redisCtx(t)
			const burst, callers = 60, 300
			bs := []store.Bucket{{Key: "a", Rule: "a", Interval: time.Hour, Burst: burst, Cost: 1}}
			var admitted, gaveUp atomic.Int64
			var wg sync.WaitGroup
			stalls := make(chan struct{})
			go func() {
				defer close(stalls)
				for range 3 {
					time.Sleep(20 * time.Millisecond)
					srv.Pause()
					time.Sleep(30 * time.Millisecond)
					srv.Resume()
				}
			}()
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Duration(i%50) * time.Millisecond / 2)
					cctx, cancel := context.WithTimeout(ctx, time.Duration(1+i%40)*time.Millisecond)
					defer cancel()
					r, err := s.Reserve(cctx, bs, 0)
					switch {
					case err != nil && (cctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)):
						// The context's error, or the socket's timeout at
						// the context's deadline (ContextTimeoutEnabled), or
						// the pipeline's deadline, the latest of its calls':
						// its timer may fire before this one's.
						gaveUp.Add(1)
					case err != nil:
						t.Errorf("reserve: %v", err)
					case r.OK:
						admitted.Add(1)
					}
				}()
			}
			wg.Wait()
			<-stalls
			if admitted.Load() > burst {
				t.Errorf("%d admitted by a bucket of burst %d", admitted.Load(), burst)
			}
			t.Logf("%d admitted, %d gave up, of %d", admitted.Load(), gaveUp.Load(), callers)
			// Let late refunds finish before goleak looks.
			time.Sleep(100 * time.Millisecond)
		})
	}
}

// TestGroupByTag: calls go as one script call per hash tag, in order, in
// runs of at most maxBatchRequests.
func TestGroupByTag(t *testing.T) {
	calls := func(tags ...string) []*scriptCall {
		cs := make([]*scriptCall, len(tags))
		for i, tag := range tags {
			cs[i] = &scriptCall{tag: tag, keys: make([]string, i)} // the number of keys tells them apart
		}
		return cs
	}
	shape := func(groups [][]*scriptCall) [][]int {
		var out [][]int
		for _, g := range groups {
			var ids []int
			for _, c := range g {
				ids = append(ids, len(c.keys))
			}
			out = append(out, ids)
		}
		return out
	}
	same := calls("", "", "")
	if got := groupByTag(same); len(got) != 1 || &got[0][0] != &same[0] {
		t.Errorf("one tag: %v, want the batch itself", shape(got))
	}
	mixed := groupByTag(calls("a", "b", "a", "", "b"))
	if got, want := shape(mixed), [][]int{{0, 2}, {1, 4}, {3}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mixed tags: %v, want %v", got, want)
	}
	tags := make([]string, 2*maxBatchRequests+3)
	big := groupByTag(calls(tags...))
	if len(big) != 3 || len(big[0]) != maxBatchRequests || len(big[1]) != maxBatchRequests || len(big[2]) != 3 ||
		len(big[1][0].keys) != maxBatchRequests || len(big[2][2].keys) != 2*maxBatchRequests+2 {
		t.Errorf("%d calls of one tag: groups of %d, %d, …; want runs of %d in order", len(tags), len(big[0]), len(big[1]), maxBatchRequests)
	}
}
