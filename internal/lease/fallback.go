package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultProbeEvery is how often a Fallback whose Redis failed lets one
// Acquire probe it: four times a second, so that the fleet is back on the
// shared cap well within a second of Redis's return, at one PING per
// replica per 250 ms while it is down.
const DefaultProbeEvery = 250 * time.Millisecond

// DefaultReturnGrace is how long after Redis answers the fleet again its
// requests also take a lease in the local semaphore (this replica's
// share): the other replicas return one by one, each within a probe
// interval of Redis answering it, but go-redis re-dials a server that
// refused its dials only once a second, so the last may return about
// 1.25 s late. Meanwhile those still local are invisible to Redis, and the
// share keeps the returned ones from taking their slots too. The grace is
// the fleet's (return.lua): it starts when the first replica is back, and
// a replica back later has what is left of it, so that a replica that
// re-dialled late does not hold its requests to its share for a whole
// grace more (TestFleetLeasesThroughRedisKill/10, shares of 2 of 10 and a
// grace per replica: 0.845-0.885 of the cap from 2 s after the return).
const DefaultReturnGrace = 1500 * time.Millisecond

// FallbackOption configures NewFallback.
type FallbackOption interface{ applyFallback(*Fallback) }

type fallbackOptionFunc func(*Fallback)

func (f fallbackOptionFunc) applyFallback(fb *Fallback) { f(fb) }

// WithFleetSize sets the replicas the Fallback assumes when live reports 0
// or less (the count is not known yet) and has never reported more (once
// it has, its last such count stands in). If n ≤ 0, the default, the local
// share of a cap is the whole Limit: no request is refused for want of a
// count, at the price of a fleet of N replicas admitting up to N × Limit
// while Redis is down.
func WithFleetSize(n int) FallbackOption {
	return fallbackOptionFunc(func(fb *Fallback) { fb.fleetSize = n })
}

// WithReturnGrace sets how long after Redis's return requests also take a
// local lease (see DefaultReturnGrace). If d < 0, DefaultReturnGrace is
// used; 0 means no grace.
func WithReturnGrace(d time.Duration) FallbackOption {
	return fallbackOptionFunc(func(fb *Fallback) {
		if d >= 0 {
			fb.grace = d
		}
	})
}

// WithProbeEvery sets how often a Fallback probes a failed Redis. If
// d ≤ 0, DefaultProbeEvery is used.
func WithProbeEvery(d time.Duration) FallbackOption {
	return fallbackOptionFunc(func(fb *Fallback) {
		if d > 0 {
			fb.probeEvery = d
		}
	})
}

// Fallback is a Redis store that goes on granting leases while Redis is
// down, from a local semaphore sized to this replica's share of each cap
// (see the package doc for the model). It is safe for concurrent use; the
// zero value is not usable (use NewFallback). It owns no goroutine beyond
// those of its Redis store, which its owner closes.
type Fallback struct {
	r          *Redis
	local      *Local
	live       func() int
	fleetSize  int
	probeEvery time.Duration
	grace      time.Duration
	// lastLive is the last count above 0 that live reported, 0 before one.
	lastLive atomic.Int64

	mu        sync.Mutex
	upAt      time.Time // when Redis last came back
	down      bool
	probing   bool
	nextProbe time.Time
	returned  chan struct{} // while down: closed when Redis is back
	// localHeld holds the leases counted by the local semaphore: those
	// granted by it, and the Redis leases held when Redis failed; true once
	// registered in Redis (or being registered).
	localHeld map[*Lease]bool
}

// NewFallback returns a Fallback around r. live returns the replicas of
// the fleet alive now (the root's heartbeat count); it is called under a
// lock and must not block. A nil live means 0 (unknown). NewFallback takes
// over r's failure reports: use r through the Fallback only.
func NewFallback(r *Redis, live func() int, opts ...FallbackOption) *Fallback {
	if live == nil {
		live = func() int { return 0 }
	}
	f := &Fallback{r: r, live: live, probeEvery: DefaultProbeEvery, grace: DefaultReturnGrace, localHeld: map[*Lease]bool{}}
	for _, o := range opts {
		o.applyFallback(f)
	}
	f.local = NewLocal(WithLocalAging(r.aging), withLocalClimb(r.climb))
	f.local.observeTTL = r.observeTTL
	f.local.limit = f.share
	r.onError = f.failed
	return f
}

// share returns this replica's share of c while Redis is down, for n
// replicas: live(); when live() ≤ 0, the last count above 0 it reported
// (a heartbeat distrusts its count for a beat or two after Redis restarted
// empty, just when the return grace sizes the local semaphore with the
// share), else the fleet size, else 1. It is ceil(Limit / n) when n such shares stay within 110 % of
// the Limit, else floor(Limit / n): without a rank among the replicas each
// takes the same share, and ceil(10 / 4) = 3 would let 4 replicas admit
// 12. It is never below 1, so with more replicas than Limit the fleet may
// admit one request per replica.
func (f *Fallback) share(c Cap) int {
	n := f.live()
	switch {
	case n > 0:
		f.lastLive.Store(int64(n))
	case f.lastLive.Load() > 0:
		n = int(f.lastLive.Load())
	default:
		n = f.fleetSize
	}
	if n <= 1 {
		return c.Limit
	}
	ceil := (c.Limit + n - 1) / n
	if ceil*n*10 <= c.Limit*11 {
		return ceil
	}
	return max(1, c.Limit/n)
}

// Acquire takes the leases from Redis while it answers, else from the
// local semaphore (see Store). A Redis failure during the wait moves the
// request to the local semaphore for the rest of its maxWait: it fails
// only as the local store does (maxWait, ctx), never for Redis's sake.
func (f *Fallback) Acquire(ctx context.Context, caps []Cap, p Priority, maxWait time.Duration) (*Lease, error) {
	start := time.Now()
	if f.useRedis(ctx) {
		if f.inGrace() {
			return f.acquireBoth(ctx, caps, p, start, maxWait)
		}
		l, err := f.r.Acquire(ctx, caps, p, maxWait)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return l, err
		}
	}
	return f.acquireLocal(ctx, caps, p, start, maxWait)
}

// inGrace reports whether Redis came back less than the grace ago.
func (f *Fallback) inGrace() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.upAt.IsZero() && time.Since(f.upAt) < f.grace
}

// acquireBoth takes a local lease, then the Redis lease, and holds both:
// the grace after Redis's return.
func (f *Fallback) acquireBoth(ctx context.Context, caps []Cap, p Priority, start time.Time, maxWait time.Duration) (*Lease, error) {
	ll, err := f.local.Acquire(ctx, caps, p, maxWait-time.Since(start))
	if err != nil {
		return nil, err
	}
	l, err := f.r.Acquire(ctx, caps, p, maxWait-time.Since(start))
	if err != nil {
		ll.Release()
		if errors.Is(err, ErrUnavailable) {
			return f.acquireLocal(ctx, caps, p, start, maxWait)
		}
		return nil, err
	}
	l.addPart(leasePart{ll})
	return l, nil
}

// leasePart releases a lease with another.
type leasePart struct{ l *Lease }

func (p leasePart) release() { p.l.Release() }

// acquireLocal takes the leases from the local semaphore, or from Redis if
// it returns meanwhile.
func (f *Fallback) acquireLocal(ctx context.Context, caps []Cap, p Priority, start time.Time, maxWait time.Duration) (*Lease, error) {
	f.mu.Lock()
	returned := f.returned
	f.mu.Unlock()
	if returned == nil {
		// Back up before this request reached the local semaphore.
		return f.acquireBoth(ctx, caps, p, start, maxWait)
	}
	l, err := f.local.acquire(ctx, caps, p, maxWait-time.Since(start), returned)
	if errors.Is(err, errAborted) {
		// Redis is back: wait in its queue, with the fleet.
		return f.acquireBoth(ctx, caps, p, start, maxWait)
	}
	if err != nil {
		return nil, err
	}
	f.track(l)
	if !f.Down() {
		// Granted as Redis came back: make the shared cap count it. A
		// failed registration sends the Fallback down again (failed), and
		// the next probe registers it.
		_ = f.register(ctx)
	}
	return l, nil
}

// Down reports whether the Fallback grants leases locally.
func (f *Fallback) Down() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

// Lower is Redis.Lower while Redis answers, and the same model on the local
// semaphore while it does not (the refusal then lowers this replica's
// share, counted against its local holders).
func (f *Fallback) Lower(ctx context.Context, c Cap) (int, error) {
	if !f.Down() {
		n, err := f.r.Lower(ctx, c)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return n, err
		}
	}
	return f.local.lower(ctx, c)
}

// Observe is Redis.Observe while Redis answers, and the same model on the
// local semaphore while it does not.
func (f *Fallback) Observe(ctx context.Context, c Cap, serverCount int) (int, error) {
	if !f.Down() {
		n, err := f.r.Observe(ctx, c, serverCount)
		if err == nil || !errors.Is(err, ErrUnavailable) {
			return n, err
		}
	}
	return f.local.observe(ctx, c, serverCount)
}

// useRedis reports whether a request should go to Redis: always while it
// is up; while down, for one probe per probe interval whose PING answered
// and whose registration of the local leases succeeded.
func (f *Fallback) useRedis(ctx context.Context) bool {
	f.mu.Lock()
	if !f.down {
		f.mu.Unlock()
		return true
	}
	if f.probing || time.Now().Before(f.nextProbe) {
		f.mu.Unlock()
		return false
	}
	f.probing = true
	f.mu.Unlock()

	err := f.probe(ctx)
	f.mu.Lock()
	f.probing = false
	if err != nil {
		f.nextProbe = time.Now().Add(f.probeEvery)
		f.mu.Unlock()
		return false
	}
	f.down = false
	f.upAt = time.Now()
	close(f.returned)
	f.returned = nil
	f.mu.Unlock()
	// Leases the local semaphore granted during the probe; a failure sends
	// the Fallback down again, and the next probe retries.
	_ = f.register(ctx)
	f.joinGrace(ctx)
	return true
}

// joinGrace ends this replica's grace with the fleet's (return.lua): the
// first replica back starts it, the later ones get what is left. A failed
// call leaves this replica its own, longer, grace.
func (f *Fallback) joinGrace(ctx context.Context) {
	if f.grace <= 0 {
		return
	}
	v, err := f.r.run(ctx, "return", returnScript, []string{f.r.prefix + "return"}, []any{f.grace.Milliseconds()}, nil)
	if err != nil {
		return
	}
	left, ok := v.(int64)
	if !ok || left < 0 || left > f.grace.Milliseconds() {
		return
	}
	end := time.Now().Add(time.Duration(left) * time.Millisecond)
	f.mu.Lock()
	if !f.upAt.IsZero() && end.Before(f.upAt.Add(f.grace)) {
		f.upAt = end.Add(-f.grace)
	}
	f.mu.Unlock()
}

// probe pings Redis and registers in it every lease the local semaphore
// counts (see register).
func (f *Fallback) probe(ctx context.Context) error {
	_, err := f.r.call(ctx, "ping", func(ctx context.Context) (any, error) {
		return f.r.rdb.Ping(ctx).Result()
	}, nil)
	if err != nil {
		return err
	}
	// The releases and withdrawals lost in the outage first: they would hold
	// slots and the heads of queues for a TTL.
	f.r.flushOrphans(ctx)
	return f.register(ctx)
}

// register registers in Redis, as holders forced past the caps, the leases
// the local semaphore counts that are not registered yet, so that they
// count against the shared cap until released.
func (f *Fallback) register(ctx context.Context) error {
	f.mu.Lock()
	var todo []*Lease
	for l, done := range f.localHeld {
		if !done {
			f.localHeld[l] = true
			todo = append(todo, l)
		}
	}
	f.mu.Unlock()
	var failed error
	for _, l := range todo {
		if failed != nil || l.isReleased() {
			f.unclaim(l, failed != nil)
			continue
		}
		w := &redisWaiter{tid: f.r.idPrefix + "reg", caps: l.caps}
		for _, c := range l.caps {
			w.channels = append(w.channels, f.r.channel(c.Key))
		}
		r, err := f.r.acquireCall(ctx, w, true)
		if err != nil {
			failed = err
			f.unclaim(l, true)
			continue
		}
		p := &redisPart{s: f.r, caps: l.caps, tokens: r.tokens, lease: l}
		if l.addPart(p) {
			f.r.keeper.addLease(p)
		}
	}
	return failed
}

// unclaim marks l unregistered again (if retry and still tracked).
func (f *Fallback) unclaim(l *Lease, retry bool) {
	if !retry {
		return
	}
	f.mu.Lock()
	if _, ok := f.localHeld[l]; ok {
		f.localHeld[l] = false
	}
	f.mu.Unlock()
}

// failed hears of a failed Redis call: the Fallback goes down, counts the
// Redis leases still held in the local semaphore, and wakes the Redis
// waiters, whose next call fails them over.
func (f *Fallback) failed(error) {
	f.mu.Lock()
	if f.down {
		f.mu.Unlock()
		return
	}
	f.down = true
	f.nextProbe = time.Now().Add(f.probeEvery)
	f.returned = make(chan struct{})
	f.mu.Unlock()
	for _, p := range f.r.keeper.held() {
		f.mu.Lock()
		_, counted := f.localHeld[p.lease]
		f.mu.Unlock()
		if counted || !p.lease.addPart(f.local.force(p.caps)) {
			continue
		}
		f.track(p.lease)
	}
	f.r.hub.wakeAll()
}

// track records that the local semaphore counts l, until l is released.
func (f *Fallback) track(l *Lease) {
	f.mu.Lock()
	f.localHeld[l] = false
	f.mu.Unlock()
	l.addPart(trackPart{f: f, l: l})
}

// trackPart forgets a tracked lease when it is released.
type trackPart struct {
	f *Fallback
	l *Lease
}

func (p trackPart) release() {
	p.f.mu.Lock()
	delete(p.f.localHeld, p.l)
	p.f.mu.Unlock()
}
