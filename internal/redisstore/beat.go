package redisstore

import "context"

// Beat registers this replica in its namespace's replica set, on a call of
// its own, when a beat is due (at most once per HeartbeatEvery); otherwise
// it does nothing. Beats ride on reserve calls, so a replica whose
// requests book no bucket (rules with a concurrency cap and no rate) would
// never be counted by its peers: its Transport beats with Beat instead.
// An error means Redis could not be told; the next due beat tries again.
func (s *Store) Beat(ctx context.Context) error {
	if s.hb == nil || !s.hb.due() {
		return nil
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	_, err := s.hb.beat(cctx, s.rdb, s.nowArg())
	return err
}
