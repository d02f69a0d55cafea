package localstore

import (
	"context"

	"github.com/throttlekit/throttle/internal/store"
)

var _ store.Charger = (*Store)(nil)

// Charge books units more of cost in bucket b (see store.Charger).
func (s *Store) Charge(_ context.Context, b store.Bucket, units int64) error {
	if units == 0 || b.Algorithm.Windowed() {
		// A window bucket counts a request in the window it departed in,
		// which a correction would have to find again: the root does not
		// ask (Rule.ActualCost is for leaky and token buckets).
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	s.tats[b.Key] = gcraCharge(s.tats[b.Key], now, s.intervalLocked(b, now), b.Burst, units)
	return nil
}
