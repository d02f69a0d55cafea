package lease_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/redistest"
)

var nsSeq atomic.Int64

// uniqueNS returns a namespace no other test uses.
func uniqueNS(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", "-") + "-" + strconv.FormatInt(nsSeq.Add(1), 10)
}

// counter is a go-redis hook counting the calls a client makes. An EVAL is
// not counted: the store runs its scripts by EVALSHA, and go-redis sends
// the EVAL only after a NOSCRIPT reply (the first call of a script on a
// node), so the pair is one call.
type counter struct {
	n    atomic.Int64
	mu   sync.Mutex
	last []string
}

// record notes cmd (its name, and for any but an EVAL, whose argument is
// the whole script, its first argument) for a failure's message, and
// counts it unless it is an EVAL.
func (c *counter) record(cmd redis.Cmder) {
	name := cmd.Name()
	if name != "eval" {
		c.n.Add(1)
	}
	s := name
	if a := cmd.Args(); len(a) > 1 && name != "eval" {
		s += fmt.Sprint(" ", a[1])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = append(c.last, time.Now().Format("15:04:05.000")+" "+s)
	if len(c.last) > 8 {
		c.last = c.last[1:]
	}
}

// recent returns the last commands noted.
func (c *counter) recent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.last...)
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.record(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// newStore returns a Redis store closed at cleanup.
func newStore(t testing.TB, rdb redis.UniversalClient, opts ...lease.RedisOption) *lease.Redis {
	s := lease.NewRedis(rdb, opts...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitFor polls cond every ms for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued returns the tickets waiting under key in namespace ns.
func queued(t testing.TB, rdb redis.UniversalClient, ns, key string) int64 {
	n, err := rdb.ZCard(context.Background(), "throttle:{"+ns+"}:lease:"+key+":q").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// subscribers returns the subscribers of key's channel, summed over nodes.
func subscribers(t testing.TB, rdb redis.UniversalClient, ns, key string) int64 {
	ch := "throttle:{" + ns + "}:lease:" + key + ":ch"
	var total atomic.Int64 // ForEachMaster runs on several goroutines
	count := func(c *redis.Client) error {
		m, err := c.PubSubNumSub(context.Background(), ch).Result()
		total.Add(m[ch])
		return err
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(context.Background(), func(_ context.Context, c *redis.Client) error { return count(c) })
	} else {
		err = count(rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}

// twoClients returns two independent clients of one deployment and an
// observer client, for a single node or a cluster, and the second client's
// command counter.
type deployment struct {
	name string
	make func(t *testing.T) (a, b, obs redis.UniversalClient, bCount *counter)
}

var deployments = []deployment{
	{"single", func(t *testing.T) (redis.UniversalClient, redis.UniversalClient, redis.UniversalClient, *counter) {
		srv := redistest.Start(t)
		b := srv.Client(t)
		c := &counter{}
		b.AddHook(c)
		return srv.Client(t), b, srv.Client(t), c
	}},
	{"cluster", func(t *testing.T) (redis.UniversalClient, redis.UniversalClient, redis.UniversalClient, *counter) {
		cl := redistest.StartCluster(t, 3)
		b := cl.Client(t)
		c := &counter{}
		b.AddHook(c)
		return cl.Client(t), b, cl.Client(t), c
	}},
}

// TestWakeByRelease: a request waiting in store B sends no command while it
// waits but its store's renewal round (one a third of the ticket TTL, for
// all its waiters), and holds its lease within a few ms of a release in
// store A (another client, as another process would be): the release
// grants it, so the waiter makes no call of its own.
func TestWakeByRelease(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			ca, cb, obs, count := d.make(t)
			ns := uniqueNS(t)
			// A TTL of a minute puts B's renewal rounds 20 s apart, out of
			// the test's way: what it counts is the waiting itself.
			a := newStore(t, ca, lease.WithNamespace(ns), lease.WithTTL(time.Minute))
			b := newStore(t, cb, lease.WithNamespace(ns), lease.WithTTL(time.Minute))
			caps := []lease.Cap{{Key: "acct", Rule: "twilio", Limit: 1}}
			const rounds = 20
			var lat []time.Duration
			for i := range rounds {
				held, err := a.Acquire(context.Background(), caps, lease.Normal, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan time.Time, 1)
				errs := make(chan error, 1)
				go func() {
					l, err := b.Acquire(context.Background(), caps, lease.Normal, 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					got <- time.Now()
					l.Release()
				}()
				waitFor(t, "the ticket", func() bool { return queued(t, obs, ns, "acct") == 1 })
				if i == 0 {
					waitFor(t, "the subscription", func() bool { return subscribers(t, obs, ns, "acct") == 1 })
				}
				time.Sleep(20 * time.Millisecond) // settle: a fresh subscription retries once
				before := count.n.Load()
				time.Sleep(100 * time.Millisecond)
				if n := count.n.Load() - before; n > 1 {
					t.Fatalf("round %d: %d commands from the waiting store in 100 ms, want at most its renewal round; last: %q", i, n, count.recent())
				}
				released := time.Now()
				held.Release()
				select {
				case at := <-got:
					lat = append(lat, at.Sub(released))
				case err := <-errs:
					t.Fatal(err)
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter was not woken by the release")
				}
				// No acquire on wake-up (granted): the release in the
				// background, and the renewal round the grant asks for if
				// it runs before the release.
				waitFor(t, "B's release", func() bool { return count.n.Load()-before >= 1 })
				waitFor(t, "an empty cap", func() bool {
					n, _ := obs.ZCard(context.Background(), "throttle:{"+ns+"}:lease:acct:h").Result()
					return n == 0
				})
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			t.Logf("%s: wake latency over %d releases: median %v, max %v", d.name, rounds, lat[rounds/2], lat[rounds-1])
			if lat[rounds/2] > 20*time.Millisecond {
				t.Fatalf("median wake latency %v, want a few ms", lat[rounds/2])
			}
		})
	}
}

// TestClusterPublishReachesOtherNodes: a release on the master of the key's
// slot reaches a subscriber connected to another master (PUBLISH is
// forwarded over the cluster bus), which is why the store's one pub/sub
// connection may sit on any node.
func TestClusterPublishReachesOtherNodes(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ns := uniqueNS(t)
	ch := "throttle:{" + ns + "}:lease:acct:ch"
	owner := cl.MasterForKey(ch)
	var other *redistest.Server
	for _, n := range cl.Nodes() {
		if n != owner {
			other = n
			break
		}
	}
	sub := other.Client(t).Subscribe(context.Background(), ch)
	defer func() { _ = sub.Close() }()
	if _, err := sub.Receive(context.Background()); err != nil { // the confirmation
		t.Fatal(err)
	}
	s := newStore(t, cl.Client(t), lease.WithNamespace(ns))
	caps := []lease.Cap{{Key: "acct", Rule: "r", Limit: 1}}
	h, err := s.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := acquireAsync(s, caps, lease.Normal, 10*time.Second)
	waitFor(t, "the ticket", func() bool { return queued(t, cl.Client(t), ns, "acct") == 1 })
	h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message on node %s for a release on %s: %v", other.Addr(), owner.Addr(), err)
	}
	if m.Payload == "" {
		t.Fatal("empty message")
	}
	r := <-w
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release()
}

// TestWaitingCost measures the Redis commands per waiting request per
// second: 50 requests of store B wait two TTLs behind leases store A
// holds, with a TTL of 3 s and with the default 10 s.
func TestWaitingCost(t *testing.T) {
	for _, ttl := range []time.Duration{3 * time.Second, lease.DefaultTTL} {
		t.Run(ttl.String(), func(t *testing.T) { testWaitingCost(t, ttl) })
	}
}

func testWaitingCost(t *testing.T, ttl time.Duration) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	cb := srv.Client(t)
	count := &counter{}
	cb.AddHook(count)
	a := newStore(t, srv.Client(t), lease.WithNamespace(ns), lease.WithTTL(ttl))
	b := newStore(t, cb, lease.WithNamespace(ns), lease.WithTTL(ttl))
	caps := []lease.Cap{{Key: "acct", Rule: "r", Limit: 5}}
	var held []*lease.Lease
	for range 5 {
		l, err := a.Acquire(context.Background(), caps, lease.Normal, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	const waiters = 50
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := b.Acquire(ctx, caps, lease.Normal, time.Minute)
			done <- err
		}()
	}
	obs := srv.Client(t)
	waitFor(t, "the tickets", func() bool { return queued(t, obs, ns, "acct") == waiters })
	time.Sleep(100 * time.Millisecond)
	statsBefore := commandCalls(t, obs)
	before := count.n.Load()
	span := 2 * ttl
	time.Sleep(span)
	n := count.n.Load() - before
	statsAfter := commandCalls(t, obs)
	// Counted server side, the script calls and pings of both stores (A's
	// renewals included); the commands scripts run inside are not requests.
	server := statsAfter - statsBefore
	perWaiter := float64(n) / waiters / span.Seconds()
	t.Logf("TTL %v: %d commands from the waiting store in %v for %d waiters: %.4f per waiting request per second; all clients, server side (commandstats EVALSHA+EVAL+PING, both stores, A's renewals included): %d", ttl, n, span, waiters, perWaiter, server)
	// One renewal call a third of the ticket TTL for the store, whatever
	// its waiters: 3 a second, 0.06 for each of 50 waiters.
	if perStore := float64(n) / span.Seconds(); perStore > 3.5 || perWaiter > 0.075 {
		t.Fatalf("%.3f commands per waiting request per second, %.2f for the store, want near zero and one renewal round a third of the ticket TTL", perWaiter, perStore)
	}
	cancel()
	for range waiters {
		if err := <-done; err == nil {
			t.Fatal("a waiter acquired while every lease was held")
		}
	}
	for _, l := range held {
		l.Release()
	}
	waitFor(t, "no tickets left", func() bool { return queued(t, obs, ns, "acct") == 0 })
}

// commandCalls sums the calls of EVALSHA, EVAL and PING in INFO
// commandstats: the requests a store sends besides (un)subscribing. The
// commands a script runs inside are counted by commandstats too, and left
// out here.
func commandCalls(t testing.TB, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval" && name != "cmdstat_ping") {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// TestLost: a lease whose holder entry Redis lost is reported by Lost at
// the next renewal round, and its Release still returns at once.
func TestLost(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	rdb := srv.Client(t)
	s := newStore(t, rdb, lease.WithNamespace(ns), lease.WithTTL(300*time.Millisecond))
	l, err := s.Acquire(context.Background(), []lease.Cap{{Key: "k", Rule: "r", Limit: 1}}, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Kept alive by renewals beyond its TTL...
	time.Sleep(500 * time.Millisecond)
	select {
	case <-l.Lost():
		t.Fatal("a renewed lease was lost")
	default:
	}
	// ...until Redis forgets it.
	if err := rdb.Del(context.Background(), "throttle:{"+ns+"}:lease:k:h").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Second):
		t.Fatal("Lost not closed after Redis forgot the lease")
	}
	start := time.Now()
	l.Release()
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Fatalf("Release took %v", d)
	}
}

// TestRedisTimeoutLeavesNothing: a request that times out holds nothing and
// leaves no ticket; maxWait 0 fails at once.
func TestRedisTimeoutLeavesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	rdb := srv.Client(t)
	s := newStore(t, rdb, lease.WithNamespace(ns))
	a, b := lease.Cap{Key: "a", Rule: "ra", Limit: 3}, lease.Cap{Key: "b", Rule: "rb", Limit: 1}
	h, err := s.Acquire(context.Background(), []lease.Cap{b}, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 50 * time.Millisecond} {
		start := time.Now()
		_, err := s.Acquire(context.Background(), []lease.Cap{a, b}, lease.High, wait)
		var te *lease.TimeoutError
		if !errorsAs(err, &te) || te.Rule != "rb" {
			t.Fatalf("maxWait %v: err %v, want a TimeoutError of rb", wait, err)
		}
		if d := time.Since(start); d < wait || d > wait+200*time.Millisecond {
			t.Fatalf("maxWait %v: returned after %v", wait, d)
		}
		for _, k := range []string{"a", "b"} {
			if n := queued(t, rdb, ns, k); n != 0 {
				t.Fatalf("maxWait %v: %d tickets left under %s", wait, n, k)
			}
		}
		if n, _ := rdb.ZCard(context.Background(), "throttle:{"+ns+"}:lease:a:h").Result(); n != 0 {
			t.Fatalf("maxWait %v: %d holders of a", wait, n)
		}
	}
	h.Release()
}

// TestResubscribeWakes: store B's connections are dropped (through a
// proxy that then holds traffic) and a release goes out while B is not
// subscribed, so its message reaches nobody; once traffic flows, go-redis
// resubscribes and the confirmation wakes the waiter, long before the next
// renewal round (TTL 30 s: every 10 s).
func TestResubscribeWakes(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	ns := uniqueNS(t)
	obs := srv.Client(t)
	opt := srv.Options()
	opt.Addr = proxy.Addr()
	a := newStore(t, srv.Client(t), lease.WithNamespace(ns), lease.WithTTL(30*time.Second))
	b := newStore(t, srv.ClientWith(t, opt), lease.WithNamespace(ns), lease.WithTTL(30*time.Second), lease.WithCallTimeout(5*time.Second))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 1}}
	for i := range 3 {
		h, err := a.Acquire(context.Background(), caps, lease.Normal, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := acquireAsync(b, caps, lease.Normal, 20*time.Second)
		waitFor(t, "the ticket", func() bool { return queued(t, obs, ns, "k") == 1 })
		waitFor(t, "the subscription", func() bool { return subscribers(t, obs, ns, "k") == 1 })
		proxy.Block()
		proxy.CloseAll()
		waitFor(t, "the subscriber gone", func() bool { return subscribers(t, obs, ns, "k") == 0 })
		h.Release()
		// The release grants B's ticket the slot: the ticket leaves the
		// queue, its grant waits for B.
		waitFor(t, "the release", func() bool { return queued(t, obs, ns, "k") == 0 })
		time.Sleep(50 * time.Millisecond)
		select {
		case <-w:
			t.Fatalf("round %d: woken while cut off", i)
		default:
		}
		unblocked := time.Now()
		proxy.Unblock()
		select {
		case r := <-w:
			if r.err != nil {
				t.Fatal(r.err)
			}
			t.Logf("round %d: woken %v after traffic resumed; the release's message had reached nobody", i, time.Since(unblocked))
			r.l.Release()
		case <-time.After(3 * time.Second):
			t.Fatalf("round %d: not woken within 3 s of the reconnect", i)
		}
		waitFor(t, "an empty cap", func() bool {
			n, _ := obs.ZCard(context.Background(), "throttle:{"+ns+"}:lease:k:h").Result()
			return n == 0
		})
	}
}

// TestLowerReachesTheFleet: a refusal reported by one store lowers the cap
// for another store's requests.
func TestLowerReachesTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	a := newStore(t, srv.Client(t), lease.WithNamespace(ns))
	b := newStore(t, srv.Client(t), lease.WithNamespace(ns))
	c := lease.Cap{Key: "acct", Rule: "twilio", Limit: 10}
	var held []*lease.Lease
	for range 3 {
		l, err := a.Acquire(context.Background(), []lease.Cap{c}, lease.Normal, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	got, err := a.Lower(context.Background(), c)
	if err != nil || got != 2 {
		t.Fatalf("Lower = %d, %v; want 2", got, err)
	}
	if _, err := b.Acquire(context.Background(), []lease.Cap{c}, lease.Normal, 0); !errorsAs(err, new(*lease.TimeoutError)) {
		t.Fatalf("another store acquired under the lowered cap: %v", err)
	}
	held[0].Release()
	held[1].Release()
	waitFor(t, "the releases", func() bool {
		n, _ := srv.Client(t).ZCard(context.Background(), "throttle:{"+ns+"}:lease:acct:h").Result()
		return n == 1
	})
	// 1 held under the cap of 2.
	l, err := b.Acquire(context.Background(), []lease.Cap{c}, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	held[2].Release()
}

// TestRedisPriority: across two stores, a waiting High request goes before
// a Normal one that arrived earlier, and a Low one last.
func TestRedisPriority(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	obs := srv.Client(t)
	a := newStore(t, srv.Client(t), lease.WithNamespace(ns))
	b := newStore(t, srv.Client(t), lease.WithNamespace(ns))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 1}}
	h, err := a.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	var done []chan result
	for i, w := range []struct {
		name  string
		store *lease.Redis
		p     lease.Priority
	}{{"low", a, lease.Low}, {"normal", b, lease.Normal}, {"high", a, lease.High}} {
		r := acquireAsync(w.store, caps, w.p, 10*time.Second)
		waitFor(t, "the ticket", func() bool { return queued(t, obs, ns, "k") == int64(i+1) })
		name := w.name
		out := make(chan result, 1)
		go func() {
			res := <-r
			order <- name
			time.Sleep(10 * time.Millisecond)
			if res.l != nil {
				res.l.Release()
			}
			out <- res
		}()
		done = append(done, out)
	}
	h.Release()
	for _, d := range done {
		if r := <-d; r.err != nil {
			t.Fatal(r.err)
		}
	}
	close(order)
	var got []string
	for n := range order {
		got = append(got, n)
	}
	if strings.Join(got, " ") != "high normal low" {
		t.Fatalf("served %v, want high normal low", got)
	}
}

// TestCancelLeavesNothing: a request whose context ends while it waits
// returns the context's error and leaves no ticket.
func TestCancelLeavesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	rdb := srv.Client(t)
	s := newStore(t, rdb, lease.WithNamespace(ns))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 1}}
	h, err := s.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, caps, lease.Normal, time.Minute)
		errs <- err
	}()
	waitFor(t, "the ticket", func() bool { return queued(t, rdb, ns, "k") == 1 })
	cancel()
	if err := <-errs; !errorsIs(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := queued(t, rdb, ns, "k"); n != 0 {
		t.Fatalf("%d tickets left", n)
	}
	h.Release()
}

// TestLostWhileRedisDown: without a Fallback, a lease whose renewals fail
// for a TTL (Redis killed) is reported lost, and an Acquire fails with an
// *UnavailableError.
func TestLostWhileRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	s := newStore(t, srv.Client(t), lease.WithNamespace(ns), lease.WithTTL(300*time.Millisecond), lease.WithCallTimeout(100*time.Millisecond))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 2}}
	l, err := s.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	killed := time.Now()
	select {
	case <-l.Lost():
		t.Logf("lost %v after the kill (TTL 300ms)", time.Since(killed))
	case <-time.After(2 * time.Second):
		t.Fatal("Lost not closed while Redis was down")
	}
	_, err = s.Acquire(context.Background(), caps, lease.Normal, time.Second)
	var ue *lease.UnavailableError
	if !errorsAs(err, &ue) || !errorsIs(err, lease.ErrUnavailable) {
		t.Fatalf("err %v, want an UnavailableError", err)
	}
	l.Release()
}

// TestRenewManyCaps: a store holding leases under 300 keys (two renewal
// calls a round) keeps every one alive past several TTLs.
func TestRenewManyCaps(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	s := newStore(t, srv.Client(t), lease.WithNamespace(ns), lease.WithTTL(300*time.Millisecond))
	var held []*lease.Lease
	for i := range 300 {
		l, err := s.Acquire(context.Background(), []lease.Cap{{Key: "k" + strconv.Itoa(i), Rule: "r", Limit: 1}}, lease.Normal, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	time.Sleep(time.Second)
	for i, l := range held {
		select {
		case <-l.Lost():
			t.Fatalf("lease %d lost", i)
		default:
		}
		l.Release()
	}
}

// TestCloseEndsWaits: Close wakes a waiting request, which withdraws its
// ticket and fails with ErrClosed.
func TestCloseEndsWaits(t *testing.T) {
	srv := redistest.Start(t)
	ns := uniqueNS(t)
	rdb := srv.Client(t)
	a := newStore(t, rdb, lease.WithNamespace(ns))
	b := lease.NewRedis(srv.Client(t), lease.WithNamespace(ns))
	caps := []lease.Cap{{Key: "k", Rule: "r", Limit: 1}}
	h, err := a.Acquire(context.Background(), caps, lease.Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := acquireAsync(b, caps, lease.Normal, time.Minute)
	waitFor(t, "the ticket", func() bool { return queued(t, rdb, ns, "k") == 1 })
	_ = b.Close()
	select {
	case res := <-r:
		if !errorsIs(res.err, lease.ErrClosed) {
			t.Fatalf("err %v, want ErrClosed", res.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close left a request waiting")
	}
	if n := queued(t, rdb, ns, "k"); n != 0 {
		t.Fatalf("%d tickets left", n)
	}
	h.Release()
}

// TestMultiCapUnderLoad: two stores' 24 workers take leases in cap a, cap
// b or both, at random; no cap is ever exceeded, and every request is
// served (no deadlock between the all-or-none requests and the single
// ones, no lost wake-up), on one node and on a cluster.
func TestMultiCapUnderLoad(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			ca, cb, _, _ := d.make(t)
			ns := uniqueNS(t)
			stores := []*lease.Redis{newStore(t, ca, lease.WithNamespace(ns)), newStore(t, cb, lease.WithNamespace(ns))}
			a, b := lease.Cap{Key: "a", Rule: "ra", Limit: 3}, lease.Cap{Key: "b", Rule: "rb", Limit: 2}
			choices := [][]lease.Cap{{a}, {b}, {a, b}, {b, a}}
			var inA, inB atomic.Int64
			var over atomic.Int64
			var served atomic.Int64
			errs := make(chan error, 24)
			deadline := time.Now().Add(2 * time.Second)
			var wg sync.WaitGroup
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[i%2]
					for n := 0; time.Now().Before(deadline); n++ {
						caps := choices[(i+n)%len(choices)]
						l, err := s.Acquire(context.Background(), caps, lease.Priority(n%3-1), 10*time.Second)
						if err != nil {
							errs <- err
							return
						}
						for _, c := range caps {
							ctr := &inA
							if c.Key == "b" {
								ctr = &inB
							}
							if ctr.Add(1) > int64(c.Limit) {
								over.Add(1)
							}
						}
						time.Sleep(time.Millisecond)
						for _, c := range caps {
							if c.Key == "a" {
								inA.Add(-1)
							} else {
								inB.Add(-1)
							}
						}
						l.Release()
						served.Add(1)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%s: %d requests served in 2 s", d.name, served.Load())
			if n := over.Load(); n != 0 {
				t.Fatalf("a cap was exceeded %d times", n)
			}
		})
	}
}
