package throttle

import (
	"context"
	"net/http"

	"github.com/throttlekit/throttle/internal/store"
)

// The correction of costs from the server's answers (Rule.ActualCost): a
// request is booked at its estimate, and the difference from what its
// answer says it cost goes to the store at once (store.Charger), with the
// booking's marks. A charge always lands: it only delays the bookings that
// follow. A refund lands in the bucket's next free slot when no request is
// booked ahead of now; in a bucket with a queue it becomes a credit of the
// fleet's bucket, which the next request that would queue takes at once,
// bounded by what the server can still hold (internal/localstore's
// credit.go). Booking the next request cheaper instead, as a credit of
// this process with no such bound, was measured and met rejections from a
// server that takes the requested cost up front (as Shopify's GraphQL API
// does): a request booked below it left before the server had room for
// it.

// chargeActual reads, for every bucket of bs whose rule reads its
// requests' actual cost, what the response says the request cost, and
// charges or refunds the difference from its estimate (bs[i].Cost) in the
// store, with the bucket's mark from the reservation (marks, indexed as
// bs; nil or short when the store gave none).
func (t *Transport) chargeActual(ctx context.Context, bs []store.Bucket, marks []int64, resp *http.Response) {
	if !t.actualCosts || resp == nil {
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
		if delta := min(max(int64(n), 1), maxActualCost) - bs[i].Cost; delta != 0 {
			if ch, ok := t.store.(store.Charger); ok {
				// The correction concerns the fleet, not this request: it
				// must land even if the caller gave up meanwhile. A failed
				// one leaves the estimate.
				var mark int64
				if i < len(marks) {
					mark = marks[i]
				}
				_ = ch.Charge(context.WithoutCancel(ctx), bs[i], delta, mark)
			}
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
