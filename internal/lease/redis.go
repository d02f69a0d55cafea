package lease

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA, falling back to EVAL on NOSCRIPT (a flushed
// script cache, a restarted Redis), so they never need loading up front.
var (
	//go:embed lease.lua
	leaseLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed lower.lua
	lowerLua string
	//go:embed return.lua
	returnLua string

	acquireScript = redis.NewScript(leaseLua + acquireLua)
	releaseScript = redis.NewScript(leaseLua + releaseLua)
	renewScript   = redis.NewScript(leaseLua + renewLua)
	lowerScript   = redis.NewScript(leaseLua + lowerLua)
	returnScript  = redis.NewScript(returnLua)
)

// errReply reports a script reply of an unexpected shape.
var errReply = errors.New("throttle: concurrency cap: unexpected reply from Redis")

// Defaults of the Redis store's options.
const (
	// DefaultTTL is how long a lease or ticket lives unrenewed: a crashed
	// process's leases free their slots at most this long after its last
	// renewal. Renewals run every TTL/3, so a live lease survives two
	// failed rounds (a stall of 6.6 s); it is reported lost at the first
	// failed round a TTL or more after its last renewal.
	DefaultTTL = 10 * time.Second
	// DefaultCallTimeout bounds each Redis call: long enough for a healthy
	// Redis under load (calls take well under 1 ms), short enough that a
	// stalled Redis sends a request to the Fallback before it notices.
	DefaultCallTimeout = 500 * time.Millisecond
	// DefaultClimb is the quiet period after which a cap lowered by Lower
	// climbs back by one. Two seconds lets the requests admitted at one
	// step finish (most API calls take well under a second) before the
	// next step admits one more, so the server's next refusal, if any,
	// is a verdict on the step it follows.
	DefaultClimb = 2 * time.Second
	// DefaultObserveTTL is how long a count passed to Observe holds: a few
	// seconds, since the server's count is a snapshot of a moving figure,
	// and a view of others' use that no response refreshes should fade.
	DefaultObserveTTL = 5 * time.Second
	// DefaultTicketTTL is how long a waiting ticket, and a lease granted to
	// it that its waiter has not taken yet, lives unrenewed (at most the
	// lease TTL): a crashed waiter holds its queue place, or a slot handed
	// to it, this long at most. Tickets are renewed every third of it, in
	// the store's one renewal call per round (so a live ticket survives two
	// failed rounds), which then runs every 333 ms while the store has a
	// waiter: 3 calls a second per store (per 256 caps), shared by all its
	// waiters, nothing per waiting request. TestFleetLeasesOfKilledWorker
	// measured the cost of a SIGKILLed worker's 8 tickets at the head of
	// the queue: use 0.25 of the cap for the 1.5 s lease TTL when they lived
	// that long.
	DefaultTicketTTL = time.Second
	// releaseWait bounds how long a Release waits for its Redis call, which
	// goes on in the background past it: a release.lua call takes well
	// under 1 ms (BenchmarkHandOff: a whole hand-off in 0.25 ms), so a
	// healthy Redis answers within it, and a stalled one costs the caller
	// of Release (a response body's Close) at most 5 ms.
	releaseWait = 5 * time.Millisecond
	// maxCapsPerRenewal bounds the caps of one renewal call, so that one
	// call never runs long inside Redis.
	maxCapsPerRenewal = 256
	// observeEvery is the least interval between two Observe calls of one
	// key: a header on every response costs at most 4 calls a second per
	// key and store, and a change in others' use reaches the fleet within
	// 250 ms.
	observeEvery = 250 * time.Millisecond
)

// RedisOption configures NewRedis.
type RedisOption interface{ applyRedis(*Redis) }

type redisOptionFunc func(*Redis)

func (f redisOptionFunc) applyRedis(s *Redis) { f(s) }

// WithNamespace sets the namespace of the store's keys,
// "throttle:{ns}:lease:<key>:…", whose hash tag puts every cap of one
// request in one Cluster slot. The default is "default".
func WithNamespace(ns string) RedisOption {
	return redisOptionFunc(func(s *Redis) { s.prefix = "throttle:{" + ns + "}:lease:" })
}

// WithTTL sets the lifetime of an unrenewed lease. If d < 30 ms,
// DefaultTTL is used. A ticket lives DefaultTicketTTL, or d if shorter.
func WithTTL(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) {
		if d >= 30*time.Millisecond {
			s.ttl = d
		}
	})
}

// WithAging sets the aging step of waiting tickets (see Priority). If
// d ≤ 0, DefaultAging is used.
func WithAging(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) {
		if d > 0 {
			s.aging = d
		}
	})
}

// WithCallTimeout bounds each Redis call on top of the caller's context.
// If d ≤ 0, DefaultCallTimeout is used.
func WithCallTimeout(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) {
		if d > 0 {
			s.callTimeout = d
		}
	})
}

// WithClimb sets the quiet period after which a lowered cap climbs back by
// one (see Lower). If d ≤ 0, DefaultClimb is used.
func WithClimb(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) {
		if d > 0 {
			s.climb = d
		}
	})
}

// WithObserveTTL sets how long a count passed to Observe holds. If d ≤ 0,
// DefaultObserveTTL is used.
func WithObserveTTL(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) {
		if d > 0 {
			s.observeTTL = d
		}
	})
}

// withTicketTTL sets the ticket TTL (tests of the scripts only).
func withTicketTTL(d time.Duration) RedisOption {
	return redisOptionFunc(func(s *Redis) { s.ticketTTLSet = d })
}

// withNow makes the scripts use now() instead of Redis's TIME (tests only).
func withNow(now func() time.Time) RedisOption {
	return redisOptionFunc(func(s *Redis) { s.now = now })
}

// Redis keeps leases in Redis, shared by every store on the same Redis and
// namespace: each cap key holds its holders, keyed by fencing token and
// scored by expiry, and its queue of waiting tickets (see lease.lua). It
// is safe for concurrent use. It never closes the client; Close stops its
// background work (renewals, the pub/sub connection) and must be called
// once the store is no longer used. The zero value is not usable.
type Redis struct {
	rdb       redis.UniversalClient
	prefix    string
	ttl       time.Duration
	ticketTTL time.Duration // min(ttl, DefaultTicketTTL)
	// ticketTTLSet, when set (tests), is the ticket TTL.
	ticketTTLSet time.Duration
	aging        time.Duration
	callTimeout  time.Duration
	climb        time.Duration
	observeTTL   time.Duration
	now          func() time.Time // nil: Redis's TIME

	// guard is set when the client ignores context deadlines (see call).
	guard bool

	// onError, when set (by the Fallback), hears of every failed call.
	onError func(error)

	hub    *hub
	keeper *keeper

	idPrefix string
	idSeq    atomic.Uint64

	bgMu   sync.Mutex
	closed bool
	bg     sync.WaitGroup // background releases

	obsMu    sync.Mutex
	observed map[string]observation

	orphans orphans
}

// observation is when Observe last sent a count for a key, and the cap
// Redis answered.
type observation struct {
	at  time.Time
	cap int
}

// NewRedis returns a Redis store on rdb. It starts no goroutine until a
// request waits or holds a lease.
func NewRedis(rdb redis.UniversalClient, opts ...RedisOption) *Redis {
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	s := &Redis{
		rdb:         rdb,
		prefix:      "throttle:{default}:lease:",
		ttl:         DefaultTTL,
		aging:       DefaultAging,
		callTimeout: DefaultCallTimeout,
		climb:       DefaultClimb,
		observeTTL:  DefaultObserveTTL,
		idPrefix:    hex.EncodeToString(id[:]) + "-",
		observed:    map[string]observation{},
	}
	for _, o := range opts {
		o.applyRedis(s)
	}
	s.ticketTTL = min(s.ttl, DefaultTicketTTL)
	if s.ticketTTLSet > 0 {
		s.ticketTTL = s.ticketTTLSet
	}
	s.guard = !honoursDeadlines(rdb)
	s.hub = newHub(s)
	s.keeper = newKeeper(s)
	return s
}

// Close stops the store's background work: the renewal loop (the leases
// still held then are no longer renewed and expire after the TTL), the
// pub/sub connection and pending releases, which it waits for (each
// bounded by the call timeout). Waiting requests withdraw their tickets and
// fail with ErrClosed, as does every Acquire afterwards.
// It does not close the client. Close is idempotent.
func (s *Redis) Close() error {
	s.bgMu.Lock()
	s.closed = true
	s.bgMu.Unlock()
	s.hub.wakeAll() // waiters withdraw their tickets and fail with ErrClosed
	s.keeper.close()
	s.hub.close()
	s.bg.Wait()
	return nil
}

// isClosed reports whether Close was called.
func (s *Redis) isClosed() bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	return s.closed
}

// redisWaiter is one Acquire on Redis, waiting or about to.
type redisWaiter struct {
	tid      string
	caps     []Cap
	channels []string
	prio     Priority
	score    string        // the ticket's effective arrival, "" before the first reply
	wake     chan struct{} // buffered 1: a message, a renewal or a resubscription

	mu      sync.Mutex
	granted bool  // a release granted the ticket its lease (see lease.lua's wake)
	token   int64 // the granted lease's token
}

// ticketID returns the id of ticket seq of a store whose ids start with
// prefix, for a request of n caps: lease.lua grants on release only the
// tickets whose id ends in "/1".
func ticketID(prefix string, seq uint64, n int) string {
	return prefix + strconv.FormatUint(seq, 36) + "/" + strconv.Itoa(n)
}

// offer hands w the lease a release granted it, and wakes it.
func (w *redisWaiter) offer(token int64) {
	w.mu.Lock()
	w.granted, w.token = true, token
	w.mu.Unlock()
	w.signal()
}

// take returns the token of the lease granted to w, if any.
func (w *redisWaiter) take() (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.token, w.granted
}

// signal wakes w without blocking.
func (w *redisWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Acquire takes one lease in every cap of caps, all or none (see Store). A
// request that cannot enqueues a ticket and sleeps until a message on a
// cap's channel (or the reply of this store's own release) names it, a
// renewal round finds it may acquire or was granted, or the pub/sub
// connection resubscribes. A request of one cap named with a grant holds
// its lease at once; otherwise it tries again, and its call takes a grant
// it missed. A failed Redis call ends it with an *UnavailableError.
func (s *Redis) Acquire(ctx context.Context, caps []Cap, p Priority, maxWait time.Duration) (*Lease, error) {
	if err := checkCaps(caps); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	start := time.Now()
	w := &redisWaiter{
		tid:  ticketID(s.idPrefix, s.idSeq.Add(1), len(caps)),
		caps: append([]Cap(nil), caps...),
		prio: p.clamp(),
		wake: make(chan struct{}, 1),
	}
	for _, c := range caps {
		w.channels = append(w.channels, s.channel(c.Key))
	}
	// Registered before the first call, so that a message naming the
	// ticket right after its enqueue finds it.
	s.hub.add(w)
	defer s.hub.remove(w)

	var timer *time.Timer
	var timeout <-chan time.Time
	queued := false
	for {
		if tok, ok := w.take(); ok {
			// Granted by a release: the lease is ours without a call. It
			// expires at the ticket TTL until renewed: ask for a round.
			s.keeper.dropTicket(w)
			l := s.grantShort(w.caps, []int64{tok})
			if err := ctx.Err(); err != nil {
				l.Release()
				return nil, err
			}
			return l, nil
		}
		r, err := s.acquireCall(ctx, w, false)
		if err != nil {
			if queued {
				s.keeper.dropTicket(w)
			}
			// The call may have queued the ticket before it failed.
			s.orphans.add(orphan{caps: w.caps, tid: w.tid})
			return nil, err
		}
		if r.ok {
			if queued {
				s.keeper.dropTicket(w)
			}
			l := s.grant(w.caps, r.tokens)
			if err := ctx.Err(); err != nil {
				l.Release()
				return nil, err
			}
			return l, nil
		}
		w.score = r.score
		if maxWait <= 0 {
			s.withdraw(ctx, w)
			return nil, &TimeoutError{Rule: w.caps[r.blocked].Rule, Waited: time.Since(start)}
		}
		if !queued {
			queued = true
			s.keeper.addTicket(w)
			timer = time.NewTimer(maxWait - time.Since(start))
			defer timer.Stop()
			timeout = timer.C
			if fresh := s.hub.subscribe(ctx, w); fresh {
				// A release between the enqueue and the subscription
				// published to nobody: look again now that we listen.
				continue
			}
		}
		s.keeper.netIn(r.net)
		if s.isClosed() {
			// Closed after Close woke the waiters: nobody will wake this one.
			s.keeper.dropTicket(w)
			s.withdraw(ctx, w)
			return nil, ErrClosed
		}
		if _, ok := w.take(); ok {
			continue // granted while the call was on its way
		}
		select {
		case <-w.wake:
			if s.isClosed() {
				s.keeper.dropTicket(w)
				s.withdraw(ctx, w)
				return nil, ErrClosed
			}
			continue
		case <-timeout:
			s.keeper.dropTicket(w)
			s.withdraw(ctx, w)
			return nil, &TimeoutError{Rule: w.caps[r.blocked].Rule, Waited: time.Since(start)}
		case <-ctx.Done():
			s.keeper.dropTicket(w)
			s.withdraw(ctx, w)
			return nil, ctx.Err()
		}
	}
}

// grant returns the Lease of tokens, renewed by the keeper from now on.
func (s *Redis) grant(caps []Cap, tokens []int64) *Lease {
	p := &redisPart{s: s, caps: caps, tokens: tokens}
	l := newLease(caps, tokens, p)
	p.lease = l
	s.keeper.addLease(p)
	return l
}

// grantShort is grant for a lease a release granted, which Redis keeps
// for the ticket TTL until renewed: it asks for a round at once, and counts
// the lease unrenewed since a TTL before its Redis expiry, so that failed
// rounds mark it lost when Redis drops it.
func (s *Redis) grantShort(caps []Cap, tokens []int64) *Lease {
	p := &redisPart{s: s, caps: caps, tokens: tokens}
	l := newLease(caps, tokens, p)
	p.lease = l
	s.keeper.addLeaseAt(p, time.Now().Add(s.ticketTTL-s.ttl))
	s.keeper.netIn(0)
	return l
}

// redisPart is a Redis store's share of a lease.
type redisPart struct {
	s      *Redis
	caps   []Cap
	tokens []int64
	lease  *Lease
	// renewed is when the last successful renewal (or the grant) was
	// sent; guarded by the keeper's mutex.
	renewed time.Time
}

func (p *redisPart) release() {
	p.s.keeper.dropLease(p)
	done := p.s.background(func(ctx context.Context) {
		if _, err := p.s.releaseCall(ctx, p.caps, p.tokens, ""); err != nil {
			p.s.orphans.add(orphan{caps: p.caps, tokens: p.tokens})
		}
	})
	// Waiting a little lets the release go out before the caller's next
	// work rather than after it (the new goroutine would otherwise wait
	// for this one to block): the slot's next holder is served sooner.
	t := time.NewTimer(releaseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// handOver gives this store's waiters the grants of a release's reply at
// once, ahead of the message that names them too.
func (s *Redis) handOver(grants []string) {
	if len(grants) > 0 {
		s.hub.deliver(grants)
	}
}

// background runs f on a goroutine of its own with a context bounded by the
// call timeout, unless the store is closed. The channel is closed when f
// has returned (at once if it does not run).
func (s *Redis) background(f func(ctx context.Context)) <-chan struct{} {
	done := make(chan struct{})
	s.bgMu.Lock()
	if s.closed {
		s.bgMu.Unlock()
		close(done)
		return done
	}
	s.bg.Add(1)
	s.bgMu.Unlock()
	go func() {
		defer s.bg.Done()
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
		defer cancel()
		f(ctx)
	}()
	return done
}

// withdraw takes w's ticket out of the queues before Acquire returns, so
// that no ticket is left behind; if Redis does not answer, the withdrawal
// is sent again once it does (see orphans), or the ticket expires.
func (s *Redis) withdraw(ctx context.Context, w *redisWaiter) {
	if _, err := s.releaseCall(ctx, w.caps, nil, w.tid); err != nil {
		s.orphans.add(orphan{caps: w.caps, tid: w.tid})
	}
}

// keys returns the four keys of cap key k, in lease.lua's order.
func (s *Redis) keys(k string) [4]string {
	b := s.prefix + k
	return [4]string{b + ":h", b + ":q", b + ":x", b + ":s"}
}

// channel returns the channel of cap key k.
func (s *Redis) channel(k string) string { return s.prefix + k + ":ch" }

// nowArg returns the now the scripts take: "" for Redis's TIME.
func (s *Redis) nowArg() string {
	if s.now == nil {
		return ""
	}
	return strconv.FormatInt(s.now().UnixMilli(), 10)
}

// keep is how long idle keys live: long enough for a lowered cap to be
// remembered through a quiet minute.
func (s *Redis) keep() int64 { return max(6*s.ttl, time.Minute).Milliseconds() }

// run runs script with the call timeout, reporting failures as
// *UnavailableError (and to onError). late, if not nil, gets the reply of
// a call the caller gave up on (see call).
func (s *Redis) run(ctx context.Context, op string, script *redis.Script, keys []string, args []any, late func(any)) (any, error) {
	return s.call(ctx, op, func(ctx context.Context) (any, error) {
		return script.Run(ctx, s.rdb, keys, args...).Result()
	}, late)
}

// errCallTimeout is the cause of a call the guard gave up on.
var errCallTimeout = errors.New("call timed out")

// call runs f with a context bounded by the call timeout. A client that
// ignores context deadlines (ContextTimeoutEnabled unset, go-redis's
// default) would hold the caller for its own read timeout, 3 s by default,
// while Redis is stalled: then f runs on a goroutine of its own, which the
// caller leaves at the call timeout; f's late reply, if any, goes to late
// (an acquire booked for nobody is released), and Close waits for it.
func (s *Redis) call(ctx context.Context, op string, f func(context.Context) (any, error), late func(any)) (any, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout)
	if !s.guard {
		defer cancel()
		v, err := f(cctx)
		if err != nil {
			return nil, s.failed(op, err)
		}
		return v, nil
	}
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	var state atomic.Int32 // 0 pending, 1 answered, 2 abandoned
	s.bgMu.Lock()
	if s.closed {
		// Close may be waiting for s.bg: no goroutine may join it now.
		s.bgMu.Unlock()
		defer cancel()
		v, err := f(cctx)
		if err != nil {
			return nil, s.failed(op, err)
		}
		return v, nil
	}
	s.bg.Add(1)
	s.bgMu.Unlock()
	go func() {
		defer s.bg.Done()
		defer cancel()
		v, err := f(cctx)
		if state.CompareAndSwap(0, 1) {
			ch <- result{v, err}
			return
		}
		if err == nil && late != nil {
			late(v)
		}
	}()
	timer := time.NewTimer(s.callTimeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-ch:
	case <-timer.C:
		if state.CompareAndSwap(0, 2) {
			return nil, s.failed(op, errCallTimeout)
		}
		r = <-ch
	}
	if r.err != nil {
		return nil, s.failed(op, r.err)
	}
	return r.v, nil
}

// honoursDeadlines reports whether rdb's calls end at their context's
// deadline.
func honoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// failed wraps err and tells onError.
func (s *Redis) failed(op string, err error) error {
	e := &UnavailableError{Op: op, Err: err}
	if s.onError != nil {
		s.onError(e)
	}
	return e
}

// acquireReply is acquire.lua's reply.
type acquireReply struct {
	ok      bool
	tokens  []int64       // ok: one per cap
	score   string        // waiting: the ticket's effective arrival
	net     time.Duration // waiting: until the earliest expiry or climb
	blocked int           // waiting: index of the first cap not free
}

// acquireCall runs acquire.lua for w; force takes the leases whatever the
// caps' state.
func (s *Redis) acquireCall(ctx context.Context, w *redisWaiter, force bool) (acquireReply, error) {
	keys := make([]string, 0, 4*len(w.caps))
	args := make([]any, 0, 10+2*len(w.caps))
	forceArg := ""
	if force {
		forceArg = "1"
	}
	args = append(args, s.nowArg(), w.tid, w.score, int(w.prio), s.aging.Milliseconds(),
		s.ttl.Milliseconds(), s.climb.Milliseconds(), s.keep(), forceArg, s.ticketTTL.Milliseconds())
	for i, c := range w.caps {
		k := s.keys(c.Key)
		keys = append(keys, k[:]...)
		args = append(args, c.Limit, w.channels[i])
	}
	late := func(v any) {
		// A lease booked for a caller that left goes back; a ticket it
		// left expires after the TTL.
		r, err := parseAcquire(v, len(w.caps))
		if err != nil {
			return
		}
		o := orphan{caps: w.caps, tid: w.tid}
		if r.ok {
			o = orphan{caps: w.caps, tokens: r.tokens}
		}
		s.orphans.add(o)
	}
	v, err := s.run(ctx, "acquire", acquireScript, keys, args, late)
	if err != nil {
		return acquireReply{}, err
	}
	return parseAcquire(v, len(w.caps))
}

// parseAcquire checks and decodes acquire.lua's reply for n caps.
func parseAcquire(v any, n int) (acquireReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 {
		return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
	}
	flag, ok := a[0].(int64)
	if !ok {
		return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
	}
	if flag == 1 {
		if len(a) != 2+n {
			return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
		}
		r := acquireReply{ok: true, tokens: make([]int64, n)}
		for i := range n {
			t, ok := a[2+i].(int64)
			if !ok {
				return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
			}
			r.tokens[i] = t
		}
		return r, nil
	}
	if len(a) != 4 {
		return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
	}
	score, ok1 := a[1].(int64)
	net, ok2 := a[2].(int64)
	blocked, ok3 := a[3].(int64)
	if !ok1 || !ok2 || !ok3 || blocked < 1 || int(blocked) > n {
		return acquireReply{}, fmt.Errorf("%w: acquire: %v", errReply, v)
	}
	return acquireReply{
		score:   strconv.FormatInt(score, 10),
		net:     time.Duration(net) * time.Millisecond,
		blocked: int(blocked) - 1,
	}, nil
}

// releaseCall runs release.lua: it releases tokens (one per cap, or nil)
// and withdraws ticket tid ("" for none). It returns the holders removed,
// and hands the grants the release made to this store's waiters.
func (s *Redis) releaseCall(ctx context.Context, caps []Cap, tokens []int64, tid string) (int64, error) {
	keys := make([]string, 0, 4*len(caps))
	args := make([]any, 0, 5+3*len(caps))
	args = append(args, s.nowArg(), tid, s.climb.Milliseconds(), s.keep(), s.ticketTTL.Milliseconds())
	for i, c := range caps {
		k := s.keys(c.Key)
		keys = append(keys, k[:]...)
		tok := ""
		if tokens != nil {
			tok = strconv.FormatInt(tokens[i], 10)
		}
		args = append(args, c.Limit, s.channel(c.Key), tok)
	}
	v, err := s.run(ctx, "release", releaseScript, keys, args, nil)
	if err != nil {
		return 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) < 1 {
		return 0, fmt.Errorf("%w: release: %v", errReply, v)
	}
	n, ok := a[0].(int64)
	if !ok {
		return 0, fmt.Errorf("%w: release: %v", errReply, v)
	}
	grants := make([]string, 0, len(a)-1)
	for _, g := range a[1:] {
		g, ok := g.(string)
		if !ok {
			return 0, fmt.Errorf("%w: release: %v", errReply, v)
		}
		grants = append(grants, g)
	}
	s.handOver(grants)
	return n, nil
}
