package localstore

import (
	"context"

	"github.com/throttlekit/throttle/internal/store"
)

var _ store.Adjuster = (*Store)(nil)

// Adjust corrects bucket b by delta units of cost (see store.Adjuster).
func (s *Store) Adjust(_ context.Context, b store.Bucket, delta int64) error {
	if delta == 0 {
		return nil
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tats[b.Key] = gcraAdjust(s.tats[b.Key], now, s.intervalLocked(b, now), delta)
	return nil
}
