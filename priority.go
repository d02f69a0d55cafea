package throttle

import (
	"context"
	"strconv"
)

// Priority orders the requests that wait for a concurrency lease (see
// [Rule.Concurrency]), across the whole fleet: a waiting request of a
// higher priority is served before one of a lower priority, and requests
// of one priority in the order they came. A waiting request ages: its
// place is its arrival less its priority times one second, so a High
// request goes ahead of Normal ones that came less than a second before
// it, and a Low one that has waited two seconds goes ahead of a High one
// arriving now; no request waits more than two seconds longer than it
// would first come, first served. Rate slots are not reordered: each is
// booked when its request asks (docs/CONCURRENCY.md says exactly what
// holds).
//
// The zero value is [PriorityNormal]. A Priority is a plain value, safe
// for concurrent use.
type Priority int8

// The priorities, lowest first.
const (
	// PriorityLow is for background work that may wait behind everything
	// else: reindexing, backfills, exports.
	PriorityLow Priority = -1
	// PriorityNormal is the default, the zero value.
	PriorityNormal Priority = 0
	// PriorityHigh is for requests a user waits for.
	PriorityHigh Priority = 1
)

// String returns "low", "normal" or "high" (or "priority(n)" for a value
// outside the three).
func (p Priority) String() string {
	switch p {
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	case PriorityHigh:
		return "high"
	default:
		return "priority(" + strconv.Itoa(int(p)) + ")"
	}
}

// priorityKey is the context key of WithPriority.
type priorityKey struct{}

// WithPriority returns a copy of ctx that gives the requests made with it
// priority p:
//
//	req, err := http.NewRequestWithContext(throttle.WithPriority(ctx, throttle.PriorityHigh), "GET", url, nil)
//
// A value outside [PriorityLow] … [PriorityHigh] is clamped to the nearest.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, min(max(p, PriorityLow), PriorityHigh))
}

// PriorityOf returns the priority ctx carries (see [WithPriority]), or
// [PriorityNormal].
func PriorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}
