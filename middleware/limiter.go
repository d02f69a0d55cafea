package middleware

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/localstore"
	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// Limiter limits the requests of an HTTP server (see the package doc). It
// is safe for concurrent use. The zero Limiter is not usable: [New] makes
// one. Close it when done with it.
type Limiter struct {
	tiers   map[string]*tier
	def     *tier
	tierOf  func(*http.Request) string
	clock   throttle.Clock
	maxWait time.Duration
	headers func(http.Header, Decision)
	refusal func(http.ResponseWriter, *http.Request, Decision)
	store   store.Store
	quoter  store.Quoter // store, when it reports the buckets' room
	// reader is store when it reads the buckets' room in a call of its own
	// (with WithRedis), made after an admitted request's reservation.
	reader store.QuotaReader
	sems   semaphores
	// leases holds the concurrency caps with WithRedis (fleet-wide, see
	// concurrency.go); nil in process, where sems does.
	leases      lease.Store
	closeLeases func() error
	failClosed  bool
}

// New returns a Limiter set by opts, or the first configuration error: a
// *throttle.RuleError naming the rule and field of an invalid rule, a
// *throttle.OptionError naming an option given an invalid value. Without
// options it admits every request. New may be called from any goroutine.
func New(opts ...Option) (*Limiter, error) {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	l := &Limiter{
		tiers:   make(map[string]*tier),
		tierOf:  cfg.tierOf,
		clock:   cfg.clock,
		maxWait: cfg.maxWait,
		headers: cfg.headers,
		refusal: cfg.refusal,
		sems:    semaphores{n: make(map[string]int)},
	}
	if l.clock == nil {
		l.clock = systemClock{}
	}
	if l.headers == nil {
		l.headers = SetStandardHeaders
	}
	if l.refusal == nil {
		l.refusal = WriteRefusal
	}
	for _, name := range cfg.tierOrder {
		t, err := compileTier(name, cfg.tiers[name], cfg.maxWait, cfg.rdb != nil)
		if err != nil {
			return nil, err
		}
		l.tiers[name] = t
	}
	if l.def = l.tiers[""]; l.def == nil {
		l.def = &tier{}
	}
	if cfg.rdb != nil {
		var rs *redisstore.Store
		l.store, rs = newRedisStore(&cfg, l.clock)
		l.failClosed = cfg.mode == throttle.ModeFailClosed
		if anyConcurrency(l.tiers) {
			l.leases, l.closeLeases = newLeaseStore(&cfg, rs)
		}
	} else {
		l.store = localstore.New(l.clock)
	}
	l.quoter, _ = l.store.(store.Quoter)
	if l.quoter == nil && !cfg.noRoom {
		l.reader, _ = l.store.(store.QuotaReader)
	}
	return l, nil
}

// Close releases what the Limiter holds: with [WithRedis] and a rule with
// a Concurrency, the lease store's renewals and its pub/sub connection. It
// never closes the Redis client. After it the Limiter must not be used.
func (l *Limiter) Close() error {
	if l.closeLeases != nil {
		return l.closeLeases()
	}
	return nil
}

// Handler returns next wrapped in the Limiter: each request is decided
// before next sees it, refused ones answered by the refusal
// ([WithRefusal]), and admitted ones passed on with their [Decision] in
// their context and the rate-limit headers already set on the response.
// A concurrency rule's slot is held until next returns.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, release := l.decideRequest(r)
		r = r.WithContext(withDecision(r.Context(), &d))
		l.headers(w.Header(), d)
		if !d.Allowed {
			l.refusal(w, r, d)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// Decide decides r as Handler would, without writing anything: for a
// server that answers in its own shape (a simulated provider). When the
// Decision is Allowed, release gives back its concurrency slots and must
// be called once the request is done (later calls do nothing); for a
// refusal it does nothing. The
// Decision is not put in r's context (see DecisionFrom's use in Handler).
func (l *Limiter) Decide(r *http.Request) (d Decision, release func()) {
	return l.decideRequest(r)
}

// Take books cost units (at least 1) for key in every rated rule of tier
// ("" the default tier) that applies to every request (a zero Match),
// without an HTTP request: an outside consumer of the same quota, such as
// a batch job or another door to the API. A rule's Key is not called: key
// stands for what it would return (its bucket is shared with the requests
// whose Key returns key), and a rule without a Key books its one bucket.
// Take never waits and takes no concurrency slot. The error is
// [ErrUnknownTier], [ErrNoRule], a *throttle.RuleError for a cost above a
// rule's burst, or the store's (the Decision then says ReasonUnavailable);
// a refusal is no error: the Decision says it.
func (l *Limiter) Take(ctx context.Context, tierName, key string, cost int) (Decision, error) {
	t, ok := l.tiers[tierName]
	if !ok && tierName == "" {
		t, ok = l.def, true
	}
	if !ok {
		return Decision{}, ErrUnknownTier
	}
	req := requestOf{ctx: ctx, key: key, cost: max(int64(cost), 1), take: true}
	d, _, err := l.decide(t, req)
	if err == nil && len(d.Rules) == 0 {
		err = ErrNoRule
	}
	return d, err
}

// requestOf is what one decision is about: an HTTP request, or a Take.
type requestOf struct {
	ctx  context.Context
	r    *http.Request // nil for a Take
	key  string        // a Take's partition key
	cost int64         // a Take's cost
	take bool
}

func (l *Limiter) decideRequest(r *http.Request) (Decision, func()) {
	t := l.def
	if l.tierOf != nil {
		if x, ok := l.tiers[l.tierOf(r)]; ok {
			t = x
		}
	}
	d, release, _ := l.decide(t, requestOf{ctx: r.Context(), r: r})
	return d, release
}

func noRelease() {}

// decide books q in t's rules: concurrency slots first (local, cheap),
// then every rate bucket in one store call, waiting for the slot when
// allowed to. It returns the decision, the release of the concurrency
// slots (to call when the handler is done; nothing to call for a
// refusal), and for Take the error.
func (l *Limiter) decide(t *tier, q requestOf) (Decision, func(), error) {
	d := Decision{Tier: t.name, Allowed: true}
	var bs []store.Bucket
	var idx []int // d.Rules index of each bucket
	var caps []semSlot
	for _, c := range t.rules {
		if q.take && (!c.open || !c.rated) {
			continue
		}
		if !q.take && !c.Match.Matches(q.r) {
			continue
		}
		s := RuleState{Name: c.Name, Algorithm: c.Algorithm, Concurrency: c.Concurrency}
		var key string
		keyed := c.Key != nil
		if keyed {
			if q.take {
				key = q.key
			} else {
				key = c.Key(q.r)
			}
		}
		if c.rated {
			s.Limit, s.Window, s.Burst = int64(c.Limit.Rate), c.Limit.Period, c.bucket.Burst
			cost := q.cost
			if !q.take {
				cost = 1
				if c.Cost != nil {
					cost = max(int64(c.Cost(q.r)), 1)
				}
			}
			s.Cost = cost
			if cost > c.bucket.Burst {
				err := &throttle.RuleError{Rule: c.Name, Field: "Cost", Reason: "a cost above the rule's burst can never be admitted"}
				d.Rules = append(d.Rules, s)
				refuse(&d, len(d.Rules)-1, ReasonRate, 0)
				d.Err = err
				return d, noRelease, err
			}
			b := c.bucket
			b.Key, b.Cost = c.bucketKey(key, keyed), cost
			bs = append(bs, b)
			idx = append(idx, len(d.Rules))
		}
		if c.Concurrency > 0 && !q.take {
			caps = append(caps, semSlot{key: c.bucketKey(key, keyed) + "#c", cap: c.Concurrency, rule: len(d.Rules)})
		}
		d.Rules = append(d.Rules, s)
	}
	if len(d.Rules) == 0 {
		return d, noRelease, nil
	}
	release := noRelease
	if len(caps) > 0 && l.leases != nil {
		var ok bool
		if release, ok = l.acquireLeases(q.ctx, &d, caps); !ok {
			return d, noRelease, nil
		}
	} else if len(caps) > 0 {
		if refused := l.sems.acquire(caps); refused >= 0 {
			for _, c := range caps {
				d.Rules[c.rule].InFlight = c.inFlight
			}
			refuse(&d, caps[refused].rule, ReasonConcurrency, time.Second)
			return d, noRelease, nil
		}
		var once sync.Once
		release = func() { once.Do(func() { l.sems.release(caps) }) }
		for _, c := range caps {
			d.Rules[c.rule].InFlight = c.inFlight
		}
	}
	if len(bs) == 0 {
		return d, release, nil
	}
	ctx := q.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	budget := time.Duration(0)
	if !q.take {
		budget = l.budget(ctx)
	}
	var res store.Reservation
	var quotas []store.Quota
	var err error
	if l.quoter != nil {
		res, quotas, err = l.quoter.ReserveQuota(ctx, bs, budget)
	} else {
		res, err = l.store.Reserve(ctx, bs, budget)
	}
	if err != nil {
		release()
		reason := ReasonUnavailable
		if ctx.Err() != nil {
			reason = ReasonCanceled
		}
		refuse(&d, idx[0], reason, time.Second)
		d.Err = err
		if !q.take {
			err = nil
		}
		return d, noRelease, err
	}
	if res.OK && l.reader != nil {
		// A failed read (an outage mode) leaves the room unknown: the
		// headers then leave it out.
		quotas, _ = l.reader.Quotas(ctx, bs)
	}
	d.QuotaKnown = quotas != nil
	for i, qt := range quotas {
		s := &d.Rules[idx[i]]
		s.Remaining, s.Reset = qt.Remaining, qt.Reset
	}
	if !res.OK {
		release()
		refuse(&d, idx[res.Limiter], ReasonRate, res.Wait)
		s := &d.Rules[idx[res.Limiter]]
		s.Remaining = 0
		s.Reset = max(s.Reset, res.Wait)
		d.Remaining, d.Reset = 0, s.Reset
		return d, noRelease, nil
	}
	pickRule(&d)
	if res.Wait > 0 {
		if err := l.wait(ctx, res.Wait); err != nil {
			_ = res.Cancel(context.WithoutCancel(ctx))
			release()
			refuse(&d, idx[res.Limiter], ReasonCanceled, 0)
			d.Err = err
			return d, noRelease, nil
		}
		d.Waited = res.Wait
	}
	return d, release, nil
}

// refuse marks d refused by rule i for reason, retry after wait.
func refuse(d *Decision, i int, reason Reason, wait time.Duration) {
	d.Allowed, d.Reason, d.RetryAfter = false, reason, wait
	s := &d.Rules[i]
	s.Refused = true
	d.Rule, d.Limit, d.Window = s.Name, s.Limit, s.Window
	d.Remaining, d.Reset = 0, max(s.Reset, wait)
	if !s.rated() {
		d.Rule = ""
		if reason == ReasonConcurrency {
			d.Rule = s.Name
			d.Limit = int64(s.Concurrency)
		}
	}
}

// pickRule sets d's rule to the rated rule with the least room left, as a
// fraction of its quota (the first, on a tie).
func pickRule(d *Decision) {
	best := -1
	var bestFrac float64
	for i := range d.Rules {
		s := &d.Rules[i]
		if !s.rated() {
			continue
		}
		frac := float64(s.Remaining) / float64(s.Limit)
		if best < 0 || frac < bestFrac {
			best, bestFrac = i, frac
		}
	}
	if best < 0 {
		return
	}
	s := &d.Rules[best]
	d.Rule, d.Limit, d.Window, d.Remaining, d.Reset = s.Name, s.Limit, s.Window, s.Remaining, s.Reset
}

// budget returns how long a request may wait for its slot: the maximum
// wait, within the context's deadline.
func (l *Limiter) budget(ctx context.Context) time.Duration {
	b := l.maxWait
	if dl, ok := ctx.Deadline(); ok && b > 0 {
		b = min(b, dl.Sub(l.clock.Now()))
	}
	return max(b, 0)
}

// wait sleeps d on the Limiter's clock, or returns the context's error.
func (l *Limiter) wait(ctx context.Context, d time.Duration) error {
	t := l.clock.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// systemClock is the clock of package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) throttle.Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
