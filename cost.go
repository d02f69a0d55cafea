package throttle

import (
	"context"
	"net/http"

	"github.com/throttlekit/throttle/internal/store"
)

// The correction of costs from the server's answers (Rule.ActualCost): a
// request is booked at its estimate, and the difference from what its
// answer says it cost goes to the store at once (store.Charger). A charge
// always lands: it only delays the bookings that follow. A refund lands
// only in a bucket with no request booked ahead of now, and never moves
// the bucket's next free slot into the past: internal/localstore's
// gcraCharge gives the measurement that set this. Booking the next
// request cheaper instead, as a credit of this process, was measured too
// and met rejections from a server that takes the requested cost up front
// (as Shopify's GraphQL API does): a request booked below it leaves before
// the server has room for it.

// chargeActual reads, for every bucket of bs whose rule reads its
// requests' actual cost, what the response says the request cost, and
// charges or refunds the difference from its estimate (bs[i].Cost) in the
// store.
func (t *Transport) chargeActual(ctx context.Context, bs []store.Bucket, resp *http.Response) {
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
				_ = ch.Charge(context.WithoutCancel(ctx), bs[i], delta)
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
