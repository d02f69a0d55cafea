package middleware

import (
	"context"
	"time"

	"github.com/throttlekit/throttle"
)

// Reason says why a request was refused. The zero Reason, ReasonNone, is
// that of an admitted request.
type Reason int

const (
	// ReasonNone: the request was admitted.
	ReasonNone Reason = iota
	// ReasonRate: a rule's rate had no room for the request (within the
	// maximum wait, see [WithMaxWait]); answered 429.
	ReasonRate
	// ReasonConcurrency: a rule's concurrency cap was full; answered 429.
	ReasonConcurrency
	// ReasonUnavailable: the shared store could not be reached and the
	// outage mode fails closed ([throttle.ModeFailClosed]); answered 503.
	ReasonUnavailable
	// ReasonCanceled: the request's context ended while it waited for its
	// slot; its booking was given back. Answered 429 if anything is still
	// listening.
	ReasonCanceled
)

// String returns the reason as the JSON body's error type spells it:
// "none", "rate_limited", "concurrency_limited", "unavailable",
// "canceled".
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonRate:
		return "rate_limited"
	case ReasonConcurrency:
		return "concurrency_limited"
	case ReasonUnavailable:
		return "unavailable"
	case ReasonCanceled:
		return "canceled"
	}
	return "unknown"
}

// Decision is what the Limiter decided for one request (or one
// [Limiter.Take]). It is a value: the Limiter never changes one it has
// handed out, so it may be kept and read from any goroutine. The zero
// Decision admits a request that no rule applied to.
type Decision struct {
	// Allowed is set when the request was admitted.
	Allowed bool
	// Reason is why it was refused; ReasonNone when Allowed.
	Reason Reason
	// Tier is the tier the request was checked against ("" the default).
	Tier string
	// Rule is the name of the rule that decided: the one that refused, else
	// the rated rule with the least room left (the first, on a tie); "" when
	// no rated rule applied.
	Rule string
	// Limit is that rule's quota per Window: its Limit.Rate.
	Limit int64
	// Window is that rule's Limit.Period.
	Window time.Duration
	// Remaining is the units of cost that rule could still take at once
	// after this decision (0 on a refusal); meaningful when QuotaKnown.
	Remaining int64
	// Reset is the time until that rule's whole quota is back; meaningful
	// when QuotaKnown (on a refusal it is at least RetryAfter).
	Reset time.Duration
	// QuotaKnown is set when the store reported the rules' room: always in
	// process, with Redis while it is reachable (see the package doc). A
	// refusal knows it has none, whatever QuotaKnown says.
	QuotaKnown bool
	// RetryAfter is, on a refusal, how long until the request could be
	// admitted (for a full concurrency cap, a guess: one second); 0 when
	// Allowed.
	RetryAfter time.Duration
	// Waited is how long an admitted request waited for its slot (see
	// [WithMaxWait]).
	Waited time.Duration
	// Rules holds the state of each rule applied to the request, in the
	// tier's order. The slice is the Decision's own.
	Rules []RuleState
	// Err is the store's error of a ReasonUnavailable refusal (it wraps
	// [throttle.ErrStoreUnavailable]), or the context's error of a
	// ReasonCanceled one; nil otherwise.
	Err error
}

// RuleState is one rule's part in a [Decision].
type RuleState struct {
	// Name is the rule's Name.
	Name string
	// Algorithm is the rule's algorithm.
	Algorithm throttle.Algorithm
	// Limit and Window are the rule's Limit.Rate and Limit.Period; both 0
	// for a rule with a Concurrency alone.
	Limit  int64
	Window time.Duration
	// Burst is the most units the rule's bucket holds: Limit.Burst for a
	// leaky or token bucket (Remaining goes up to it), the quota per
	// window for a window algorithm.
	Burst int64
	// Cost is what the request weighed in the rule (Rule.Cost, at least 1).
	Cost int64
	// Remaining and Reset are as in Decision, for this rule; meaningful
	// when the Decision's QuotaKnown and the rule has a rate.
	Remaining int64
	Reset     time.Duration
	// Concurrency is the rule's cap on requests in the handler at once (0:
	// none), and InFlight the requests of the partition in it in this
	// process, this one included when admitted (0 with WithRedis, whose
	// leases are counted in Redis).
	Concurrency int
	InFlight    int
	// Refused is set for the rule that refused the request.
	Refused bool
}

// rated reports whether the rule has a rate (a Limit).
func (s *RuleState) rated() bool { return s.Limit > 0 }

type decisionKey struct{}

// DecisionFrom returns the decision the Limiter made for the request whose
// context is ctx: in the wrapped handler, and in the hooks of
// [WithHeaders] and [WithRefusal] (whose request carries it too). ok is
// false for a context that went through no Limiter.
func DecisionFrom(ctx context.Context) (d Decision, ok bool) {
	p, ok := ctx.Value(decisionKey{}).(*Decision)
	if !ok || p == nil {
		return Decision{}, false
	}
	return *p, true
}

func withDecision(ctx context.Context, d *Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}
