package localstore

import (
	"context"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

var _ store.Quoter = (*Store)(nil)

// ReserveQuota is Reserve with each bucket's room after it (see
// store.Quoter), read under the same lock as the booking.
func (s *Store) ReserveQuota(ctx context.Context, bs []store.Bucket, maxWait time.Duration) (store.Reservation, []store.Quota, error) {
	q, err := s.reserve(ctx, bs, maxWait, true)
	return q.Reservation, q.quotas, err
}

// quotaLocked returns bucket b's room at now (ns): the leaky and token
// buckets' from their TAT in closed form; a window bucket's from its
// algorithm's earliest time, the largest cost that could depart now
// (found by bisection, the earliest time being monotone in the cost) and
// the wait for its whole quota. s.mu must be held.
func (s *Store) quotaLocked(b store.Bucket, now int64) store.Quota {
	if !b.Algorithm.Windowed() {
		iv := s.intervalLocked(b, now)
		fill := max(s.tats[b.Key]-now, 0)
		used := fill / max(iv, 1)
		if fill%max(iv, 1) > 0 {
			used++
		}
		return store.Quota{Remaining: max(b.Burst-used, 0), Reset: time.Duration(fill)}
	}
	nowUs := floorMicros(now)
	ws := s.windowLocked(&b)
	civ := s.capIntervalLocked(&b, now)
	at := func(cost int64) int64 {
		c := b
		c.Cost = cost
		return windowAt(&c, ws, civ, nowUs, nowUs)
	}
	lo, hi := int64(0), b.Burst // at(lo) == now; find the largest such
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if at(mid) <= nowUs {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	reset := time.Duration(at(b.Burst)-nowUs) * time.Microsecond
	if b.Algorithm == store.FixedWindow && lo < b.Burst {
		// The quota is back at the end of the window holding now.
		reset = time.Duration(ws.w.Start(nowUs)+ws.w.Period-nowUs) * time.Microsecond
	}
	return store.Quota{Remaining: lo, Reset: max(reset, 0)}
}
