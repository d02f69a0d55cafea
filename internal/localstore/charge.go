package localstore

import (
	"context"

	"github.com/throttlekit/throttle/internal/store"
)

var _ store.Charger = (*Store)(nil)

// Charge books units more of cost in bucket b (see store.Charger).
func (s *Store) Charge(_ context.Context, b store.Bucket, units int64) error {
	if units == 0 {
		return nil
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tats[b.Key] = gcraCharge(s.tats[b.Key], now, s.intervalLocked(b, now), b.Burst, units)
	return nil
}
