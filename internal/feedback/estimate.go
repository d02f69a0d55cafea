package feedback

import (
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/store"
)

// Estimate is one reading of a quota set beside the fleet's own count of
// it, for operators (the root's EventQuota): how far the fleet's view of
// the quota is from the server's.
type Estimate struct {
	Bucket int // the bucket's index in the request's buckets
	// Limit and Remaining are the server's, as the response reported them.
	Limit, Remaining int64
	// Window is the quota's window as the model reads it (quotaWindow:
	// the server's, else the rule's time to spend Limit).
	Window time.Duration
	// Left is what the fleet's own count leaves of Limit: Limit less the
	// units the fleet's replicas reported sent in the Window before the
	// request departed, as this process's ledger knows them (carried on to
	// the departure, see ledger.window). Left − Remaining is what the
	// model takes for others' spending: another consumer of the quota, or
	// the lag of the fleet's reports.
	// It counts the trailing Window, as a sliding window does; a fixed
	// window counts from its start, so against one the two differ by what
	// the fleet sent in the Window before that start.
	Left float64
}

// Estimates returns, for each bucket of bs that the store counts and that
// this process has a view of, the readable quota of sig with the least
// remaining beside the fleet's own count of it (see Estimate), once the
// count covers that quota's whole window (in its first window the count
// holds only part of what the server counts); nil when sig reports no
// quota the model reads. bk and now are as for Read. It
// changes nothing: Read is the one that acts. It takes the views' lock, so
// the root calls it only for an observer.
func (v *Views) Estimates(bs []store.Bucket, bk Booking, sig header.Signal, now int64) []Estimate {
	if requestQuotas(sig.Quotas) == 0 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var es []Estimate
	for i := range bs {
		vw := v.views[bs[i].Key]
		if vw == nil || bk.count(i) == 0 {
			continue
		}
		var q *header.Quota
		for k := range sig.Quotas {
			if c := &sig.Quotas[k]; readable(c) && (q == nil || c.Remaining < q.Remaining) {
				q = c
			}
		}
		w := quotaWindow(q, &bs[i])
		own, covered, ok := vw.ledger.window(int64(w), bk.Depart)
		if !ok || covered < int64(w) {
			continue
		}
		es = append(es, Estimate{Bucket: i, Limit: q.Limit, Remaining: q.Remaining, Window: w, Left: float64(q.Limit) - own})
	}
	return es
}
