package throttletest

import (
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// This file is the server's limiter: package middleware's Limiter, strict
// at now (its default: a request fits every rule it meets at the instant
// it arrives, or is refused; nothing queues), on the same rules,
// algorithms and store as a server of the user's own. The Handler calls
// it under its lock, at an instant it chooses: the Limiter's clock is an
// instantClock the Handler sets before each decision, so that an outside
// consumer's request is decided at its own instant, however late the
// Handler gets to it.

// instantClock is the Limiter's clock: it tells the instant of the
// decision being taken. The Limiter never waits (no WithMaxWait), so it
// asks for no timer; one it asked for would have fired already.
type instantClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *instantClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *instantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *instantClock) NewTimer(time.Duration) throttle.Timer {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return firedTimer(ch)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

type limiter struct {
	rules []throttle.Rule // the profile's, for their Limits and Matches
	limit map[string]throttle.Limit
	clock *instantClock
	lim   *middleware.Limiter
}

// newLimiter builds the limiter of rules. Invalid rules are the
// middleware's errors: a *throttle.RuleError naming the rule and field.
func newLimiter(rules []throttle.Rule) (*limiter, error) {
	clk := &instantClock{}
	lim, err := middleware.New(middleware.WithRules(rules...), middleware.WithClock(clk))
	if err != nil {
		return nil, err
	}
	l := &limiter{rules: rules, limit: make(map[string]throttle.Limit, len(rules)), clock: clk, lim: lim}
	for _, r := range rules {
		l.limit[r.Name] = r.Limit
	}
	return l, nil
}

// mode says what decide does besides deciding.
type mode uint8

const (
	// served: an HTTP request, which holds its concurrency slots until
	// the verdict's release.
	served mode = iota
	// virtual: an outside consumer's request, which holds none.
	virtual
	// dry: only find the rules r meets; decide and book nothing.
	dry
)

// verdict is one decision of the limiter.
type verdict struct {
	admitted bool
	rule     string        // the rule that refused; "" when admitted
	byCap    bool          // refused on its concurrency cap, not its rate
	wait     time.Duration // until the refusing rule would admit; 0 for a cap or a cost it never admits
	quotas   []Quota       // the rules r meets, in order
	release  func()        // gives back the concurrency slots; nil for none
}

// decide decides r at now.
func (l *limiter) decide(r *http.Request, now time.Time, m mode) verdict {
	if m == dry {
		var v verdict
		for _, rule := range l.rules {
			if rule.Match.Matches(r) {
				v.quotas = append(v.quotas, Quota{Rule: rule.Name, Limit: rule.Limit, Concurrency: rule.Concurrency})
			}
		}
		return v
	}
	l.clock.set(now)
	d, release := l.lim.Decide(r)
	v := verdict{admitted: d.Allowed}
	if d.Allowed {
		if m == virtual {
			release()
		} else {
			v.release = release
		}
	} else {
		v.byCap = d.Reason == middleware.ReasonConcurrency
		if !v.byCap && d.Err == nil {
			v.wait = d.RetryAfter
		}
	}
	v.quotas = make([]Quota, len(d.Rules))
	for i, s := range d.Rules {
		q := Quota{Rule: s.Name, Limit: l.limit[s.Name], Concurrency: s.Concurrency, InFlight: s.InFlight}
		if s.Limit > 0 {
			q.Size = s.Burst
			q.Remaining = s.Remaining
			q.Used = s.Burst - s.Remaining
			q.Reset = s.Reset
		}
		v.quotas[i] = q
		if s.Refused {
			v.rule = s.Name
		}
	}
	return v
}
