package localstore

import (
	"context"

	"github.com/throttlekit/throttle/internal/store"
)

var _ store.Charger = (*Store)(nil)

// Charge books units more of cost in bucket b (see store.Charger). mark is
// the request's store.Reservation.Marks entry from this store (Unix ns).
func (s *Store) Charge(_ context.Context, b store.Bucket, units, mark int64) error {
	if units == 0 || b.Algorithm.Windowed() {
		// A window bucket counts a request in the window it departed in,
		// which a correction would have to find again: the root does not
		// ask (Rule.ActualCost is for leaky and token buckets).
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	iv := s.intervalLocked(b, now)
	tat := s.tats[b.Key]
	if units > 0 {
		if k, c := s.creditLocked(b.Key, now, iv); k > 0 {
			paid := min(k, units)
			s.setCreditLocked(b.Key, credit{units: k - paid, mark: c.mark}, now, iv)
			if units -= paid; units == 0 {
				return nil
			}
		}
	} else if tat > now && tat-now > store.SatMul(iv, b.Burst) {
		// A queue: the refund is a credit (credit.go).
		if mark-now >= iv {
			_, c := s.creditLocked(b.Key, now, iv)
			s.setCreditLocked(b.Key, c.refunded(now, iv, -units, mark), now, iv)
		}
		return nil
	}
	s.tats[b.Key] = gcraCharge(tat, now, iv, b.Burst, units)
	return nil
}
