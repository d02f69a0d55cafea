package throttle

import (
	"context"
	"net/http"

	"github.com/throttlekit/throttle/internal/store"
)

// chargeActual corrects the booking of a request in every bucket whose rule
// reads the actual cost from its responses (Rule.ActualCost): the
// difference from the estimate the request was booked at is charged, or
// refunded, in the store, for the whole fleet. A store that cannot adjust
// (none of this module's) or cannot be told keeps the estimate.
func (t *Transport) chargeActual(ctx context.Context, bs []store.Bucket, resp *http.Response) {
	if !t.actualCosts || resp == nil {
		return
	}
	a, ok := t.store.(store.Adjuster)
	if !ok {
		return
	}
	for i := range bs {
		c := t.rule(bs[i].Rule)
		if c == nil || c.ActualCost == nil {
			continue
		}
		n, ok := c.ActualCost(resp)
		if !ok {
			continue
		}
		actual := min(max(int64(n), 1), maxActualCost)
		if delta := actual - bs[i].Cost; delta != 0 {
			// The correction concerns the fleet, not this request: it
			// must land even if the caller gave up meanwhile. A failed one
			// leaves the estimate.
			_ = a.Adjust(context.WithoutCancel(ctx), bs[i], delta)
		}
	}
}

// maxActualCost bounds what a response may say a request cost, so that a
// hostile or broken header cannot shut a bucket for years: a million units,
// far above any provider's per-request cost (Shopify's GraphQL maximum is
// 1,000 points).
const maxActualCost = 1 << 20

// rule returns the compiled rule named name, or nil.
func (t *Transport) rule(name string) *compiledRule {
	for _, c := range t.rules {
		if c.Name == name {
			return c
		}
	}
	return nil
}
