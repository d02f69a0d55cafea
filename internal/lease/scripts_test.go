package lease

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/redistest"
)

// scriptEnv is a store whose scripts run at a now the test sets.
type scriptEnv struct {
	t   *testing.T
	s   *Redis
	now time.Time
	seq int
}

var scriptT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var nsSeq atomic.Int64

func newScriptEnv(t *testing.T, rdb redis.UniversalClient) *scriptEnv {
	e := &scriptEnv{t: t, now: scriptT0}
	ns := "scripts-" + strconv.FormatInt(nsSeq.Add(1), 10)
	e.s = NewRedis(rdb, WithNamespace(ns), WithTTL(10*time.Second), WithAging(time.Second),
		WithClimb(2*time.Second), withNow(func() time.Time { return e.now }),
		withTicketTTL(10*time.Second))
	t.Cleanup(func() { _ = e.s.Close() })
	return e
}

// ticket is a request as the scripts see it.
func (e *scriptEnv) ticket(p Priority, caps ...Cap) *redisWaiter {
	e.seq++
	w := &redisWaiter{tid: "t" + strconv.Itoa(e.seq), caps: caps, prio: p}
	for _, c := range caps {
		w.channels = append(w.channels, e.s.channel(c.Key))
	}
	return w
}

func (e *scriptEnv) acquire(w *redisWaiter) acquireReply {
	e.t.Helper()
	r, err := e.s.acquireCall(context.Background(), w, false)
	if err != nil {
		e.t.Fatal(err)
	}
	if !r.ok {
		w.score = r.score
	}
	return r
}

func (e *scriptEnv) mustAcquire(w *redisWaiter) []int64 {
	e.t.Helper()
	r := e.acquire(w)
	if !r.ok {
		e.t.Fatalf("ticket %s (prio %d) waits (blocked by cap %d), want leases", w.tid, w.prio, r.blocked)
	}
	return r.tokens
}

func (e *scriptEnv) mustWait(w *redisWaiter) acquireReply {
	e.t.Helper()
	r := e.acquire(w)
	if r.ok {
		e.t.Fatalf("ticket %s (prio %d) acquired, want a wait", w.tid, w.prio)
	}
	return r
}

func (e *scriptEnv) release(caps []Cap, tokens []int64) int64 {
	e.t.Helper()
	n, err := e.s.releaseCall(context.Background(), caps, tokens, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// grantable gives w the id of a one-cap ticket, which releases grant.
func (e *scriptEnv) grantable(w *redisWaiter) *redisWaiter {
	w.tid = ticketID("g", uint64(e.seq), len(w.caps))
	return w
}

// grant returns the token granted to w under c, failing if there is none.
func (e *scriptEnv) grant(c Cap, w *redisWaiter) int64 {
	e.t.Helper()
	k := e.s.keys(c.Key)
	tok, err := e.s.rdb.HGet(context.Background(), k[3], "g:"+w.tid).Int64()
	if err != nil {
		e.t.Fatalf("grant of %s: %v", w.tid, err)
	}
	return tok
}

func (e *scriptEnv) holders(c Cap) int64 {
	e.t.Helper()
	k := e.s.keys(c.Key)
	n, err := e.s.rdb.ZCard(context.Background(), k[0]).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *scriptEnv) tickets(c Cap) int64 {
	e.t.Helper()
	k := e.s.keys(c.Key)
	n, err := e.s.rdb.ZCard(context.Background(), k[1]).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// scriptCases are the scripts' table: each runs on a fresh namespace.
var scriptCases = []struct {
	name string
	run  func(e *scriptEnv)
}{
	{"acquire to the limit then wait, release lets the next in", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 2}
		a, b, w := e.ticket(Normal, c), e.ticket(Normal, c), e.ticket(Normal, c)
		ta := e.mustAcquire(a)
		e.now = e.now.Add(time.Second)
		e.mustAcquire(b)
		r := e.mustWait(w)
		if r.blocked != 0 || r.net != 9*time.Second {
			e.t.Fatalf("wait reply %+v, want cap 0 blocked and a net at a's expiry in 9s", r)
		}
		if n := e.release([]Cap{c}, ta); n != 1 {
			e.t.Fatalf("release removed %d, want 1", n)
		}
		e.mustAcquire(w)
		if e.tickets(c) != 0 || e.holders(c) != 2 {
			e.t.Fatalf("tickets %d holders %d, want 0 and 2", e.tickets(c), e.holders(c))
		}
	}},
	{"expiry frees the slot of an unrenewed lease", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		e.mustAcquire(e.ticket(Normal, c))
		e.now = e.now.Add(10*time.Second - time.Millisecond)
		e.mustWait(e.ticket(Normal, c))
		e.now = e.now.Add(time.Millisecond)
		// The waiter's ticket went in at the same time; it is first.
		e.mustAcquire(&redisWaiter{tid: "t2", caps: []Cap{c}, channels: []string{e.s.channel(c.Key)}})
	}},
	{"fencing: tokens grow, a late release frees nothing", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		old := e.mustAcquire(e.ticket(Normal, c))
		e.now = e.now.Add(11 * time.Second)
		cur := e.mustAcquire(e.ticket(Normal, c))
		if cur[0] <= old[0] {
			e.t.Fatalf("token %d after %d, want larger", cur[0], old[0])
		}
		if n := e.release([]Cap{c}, old); n != 0 {
			e.t.Fatalf("late release removed %d, want 0", n)
		}
		if e.holders(c) != 1 {
			e.t.Fatalf("holders %d, want the current one", e.holders(c))
		}
		r, err := e.s.renewCall([]*renewGroup{{c: c, tokens: []string{strconv.FormatInt(old[0], 10), strconv.FormatInt(cur[0], 10)}}})
		if err != nil {
			e.t.Fatal(err)
		}
		if got := r.caps[0].lostTokens; len(got) != 1 || got[0] != strconv.FormatInt(old[0], 10) {
			e.t.Fatalf("lost %v, want only the old token", got)
		}
	}},
	{"priority: high overtakes normal within a step", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		h := e.mustAcquire(e.ticket(Normal, c))
		n := e.ticket(Normal, c)
		e.mustWait(n)
		e.now = e.now.Add(500 * time.Millisecond)
		hi := e.ticket(High, c)
		e.mustWait(hi)
		e.release([]Cap{c}, h)
		e.mustWait(n)
		e.mustAcquire(hi)
	}},
	{"aging: a low ticket older than two steps precedes a new high", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		h := e.mustAcquire(e.ticket(Normal, c))
		lo := e.ticket(Low, c)
		e.mustWait(lo)
		e.now = e.now.Add(2*time.Second + time.Millisecond)
		hi := e.ticket(High, c)
		e.mustWait(hi)
		e.release([]Cap{c}, h)
		e.mustWait(hi)
		e.mustAcquire(lo)
	}},
	{"a crashed waiter's ticket expires and stops blocking the queue", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		h := e.mustAcquire(e.ticket(Normal, c))
		dead := e.ticket(Normal, c)
		e.mustWait(dead)
		e.now = e.now.Add(time.Second)
		live := e.ticket(Normal, c)
		e.mustWait(live)
		e.release([]Cap{c}, h)
		e.mustWait(live) // dead is first while its ticket lives
		e.now = e.now.Add(9 * time.Second)
		e.mustAcquire(live)
		if e.tickets(c) != 0 {
			e.t.Fatalf("%d tickets left", e.tickets(c))
		}
	}},
	{"all or none across caps", func(e *scriptEnv) {
		a, b := Cap{Key: "a", Rule: "ra", Limit: 2}, Cap{Key: "b", Rule: "rb", Limit: 1}
		hb := e.mustAcquire(e.ticket(Normal, b))
		w := e.ticket(Normal, a, b)
		r := e.mustWait(w)
		if r.blocked != 1 {
			e.t.Fatalf("blocked by cap %d, want 1 (b)", r.blocked)
		}
		if e.holders(a) != 0 {
			e.t.Fatalf("a has %d holders: a waiting request took a lease", e.holders(a))
		}
		e.release([]Cap{b}, hb)
		if toks := e.mustAcquire(w); len(toks) != 2 {
			e.t.Fatalf("tokens %v, want 2", toks)
		}
	}},
	{"renewal extends leases and tickets and names eligible tickets", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		h := e.mustAcquire(e.ticket(Normal, c))
		w := e.ticket(Normal, c)
		e.mustWait(w)
		e.now = e.now.Add(8 * time.Second)
		g := &renewGroup{c: c, tokens: []string{strconv.FormatInt(h[0], 10)}, tickets: []*redisWaiter{w}}
		r, err := e.s.renewCall([]*renewGroup{g})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(r.caps[0].lostTokens)+len(r.caps[0].lostTickets)+len(r.caps[0].eligible) != 0 || r.net != 10*time.Second {
			e.t.Fatalf("renew %+v, want nothing lost, nothing eligible, net 10s", r)
		}
		e.now = e.now.Add(8 * time.Second) // 16 s after the grant: alive by the renewal
		e.mustWait(w)
		e.release([]Cap{c}, h)
		r, err = e.s.renewCall([]*renewGroup{{c: c, tickets: []*redisWaiter{w}}})
		if err != nil {
			e.t.Fatal(err)
		}
		if got := r.caps[0].eligible; len(got) != 1 || got[0] != w.tid {
			e.t.Fatalf("eligible %v, want %s", got, w.tid)
		}
	}},
	{"lower drops the cap below the holders, climbs one per period", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 5}
		var held [][]int64
		for range 4 {
			held = append(held, e.mustAcquire(e.ticket(Normal, c)))
		}
		got, err := e.s.Lower(context.Background(), c)
		if err != nil || got != 3 {
			e.t.Fatalf("Lower = %d, %v; want 3", got, err)
		}
		e.release([]Cap{c}, held[0])
		e.release([]Cap{c}, held[1])
		e.mustAcquire(e.ticket(Normal, c)) // 3 held
		w := e.ticket(Normal, c)
		r := e.mustWait(w)
		if r.net != 2*time.Second {
			e.t.Fatalf("net %v, want the climb in 2s", r.net)
		}
		e.now = e.now.Add(2 * time.Second)
		e.mustAcquire(w) // cap 4
		// A second refusal with 4 held: 3, never above the cap in force.
		if got, _ := e.s.Lower(context.Background(), c); got != 3 {
			e.t.Fatalf("second Lower = %d, want 3", got)
		}
		e.now = e.now.Add(10 * time.Second)
		if got, _ := e.s.Observe(context.Background(), c, 0); got != 5 {
			e.t.Fatalf("cap %d after the climb with no others, want 5", got)
		}
	}},
	{"a release grants a one-cap ticket, which its next acquire takes", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		ta := e.mustAcquire(e.ticket(Normal, c))
		w := e.grantable(e.ticket(Normal, c))
		e.mustWait(w)
		e.release([]Cap{c}, ta)
		if e.tickets(c) != 0 || e.holders(c) != 1 {
			e.t.Fatalf("after the release: tickets %d holders %d, want 0 and 1 (the grant)", e.tickets(c), e.holders(c))
		}
		tok := e.grant(c, w)
		if got := e.mustAcquire(w); got[0] != tok {
			e.t.Fatalf("acquire took token %d, want the grant's %d", got[0], tok)
		}
		if e.holders(c) != 1 {
			e.t.Fatalf("holders %d after the grant was taken, want 1", e.holders(c))
		}
	}},
	{"a withdrawal gives back a grant not taken", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		ta := e.mustAcquire(e.ticket(Normal, c))
		w := e.grantable(e.ticket(Normal, c))
		e.mustWait(w)
		e.release([]Cap{c}, ta)
		if _, err := e.s.releaseCall(context.Background(), w.caps, nil, w.tid); err != nil {
			e.t.Fatal(err)
		}
		if e.holders(c) != 0 {
			e.t.Fatalf("holders %d after the withdrawal, want 0", e.holders(c))
		}
	}},
	{"a grant not taken expires a renewal interval after it, its ticket having less left", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 1}
		ta := e.mustAcquire(e.ticket(Normal, c))
		e.mustWait(e.grantable(e.ticket(Normal, c))) // its ticket expires in 10 s
		e.now = e.now.Add(9 * time.Second)
		e.release([]Cap{c}, ta)
		e.now = e.now.Add(3333*time.Millisecond - time.Millisecond) // a third of the ticket TTL
		next := e.ticket(Normal, c)
		e.mustWait(next)
		e.now = e.now.Add(time.Millisecond)
		e.mustAcquire(next)
	}},
	{"a ticket of two caps is not granted, it acquires", func(e *scriptEnv) {
		c, d := Cap{Key: "c", Rule: "r", Limit: 1}, Cap{Key: "d", Rule: "r", Limit: 1}
		ta := e.mustAcquire(e.ticket(Normal, c))
		w := e.ticket(Normal, c, d)
		w.tid = ticketID("m", 1, 2)
		e.mustWait(w)
		e.release([]Cap{c}, ta)
		if e.holders(c) != 0 || e.tickets(c) != 1 {
			e.t.Fatalf("holders %d tickets %d of c, want 0 and 1: no grant of one cap of two", e.holders(c), e.tickets(c))
		}
		e.mustAcquire(w)
	}},
	{"observe subtracts others' requests for a while", func(e *scriptEnv) {
		c := Cap{Key: "k", Rule: "r", Limit: 10}
		e.mustAcquire(e.ticket(Normal, c))
		e.mustAcquire(e.ticket(Normal, c))
		got, err := e.s.Observe(context.Background(), c, 9) // 7 are others'
		if err != nil || got != 3 {
			e.t.Fatalf("Observe = %d, %v; want 3", got, err)
		}
		e.mustAcquire(e.ticket(Normal, c))
		e.mustWait(e.ticket(Normal, c))
		e.now = e.now.Add(5 * time.Second)
		e.mustAcquire(e.ticket(Normal, c))
	}},
}

func TestScripts(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		rdb := redistest.Start(t).Client(t)
		for _, tc := range scriptCases {
			t.Run(tc.name, func(t *testing.T) { tc.run(newScriptEnv(t, rdb)) })
		}
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := redistest.StartCluster(t, 3).Client(t)
		for _, tc := range scriptCases {
			t.Run(tc.name, func(t *testing.T) { tc.run(newScriptEnv(t, rdb)) })
		}
	})
}
