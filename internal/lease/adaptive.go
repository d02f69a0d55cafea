package lease

import (
	"context"
	"fmt"
	"time"
)

// Lower tells the fleet that the server refused a request under c as too
// many concurrent (Twilio's error 20429, Stripe's
// Stripe-Rate-Limited-Reason: global-concurrency): the effective cap of
// c.Key drops, in Redis for every store, to the holders in flight minus
// one (floor 1, never above the cap already in force), and climbs back by
// one per quiet climb period (WithClimb) until it reaches c.Limit again.
// Every refusal restarts the climb. It returns the effective cap after the
// call.
func (s *Redis) Lower(ctx context.Context, c Cap) (int, error) {
	return s.lowerCall(ctx, c, "lower", 0)
}

// Observe keeps the fleet's view of c.Key in line with a count of requests
// in flight the server reported (Twilio's Twilio-Concurrent-Requests):
// the requests beyond this key's holders are someone else's use of the
// account, and for the observe TTL (WithObserveTTL) the effective cap is
// c.Limit minus them (floor 1). It returns the effective cap after the
// call. A store sends at most one count per key per 250 ms: a header on
// every response would otherwise cost a call per response. Observe drops
// the counts in between and returns the cap the last call returned.
func (s *Redis) Observe(ctx context.Context, c Cap, serverCount int) (int, error) {
	now := time.Now()
	s.obsMu.Lock()
	last, ok := s.observed[c.Key]
	s.obsMu.Unlock()
	if ok && now.Sub(last.at) < observeEvery {
		return last.cap, nil
	}
	n, err := s.lowerCall(ctx, c, "observe", serverCount)
	if err != nil {
		return 0, err
	}
	s.obsMu.Lock()
	if len(s.observed) >= 4096 {
		clear(s.observed) // a cache, not a record: forgetting costs one call
	}
	s.observed[c.Key] = observation{at: now, cap: n}
	s.obsMu.Unlock()
	return n, nil
}

// lowerCall runs lower.lua.
func (s *Redis) lowerCall(ctx context.Context, c Cap, op string, count int) (int, error) {
	if err := checkCaps([]Cap{c}); err != nil {
		return 0, err
	}
	k := s.keys(c.Key)
	args := []any{s.nowArg(), s.climb.Milliseconds(), s.keep(), c.Limit, s.channel(c.Key), op, count, s.observeTTL.Milliseconds(), s.ticketTTL.Milliseconds()}
	v, err := s.run(ctx, op, lowerScript, k[:], args, nil)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %s: %v", errReply, op, v)
	}
	return int(n), nil
}
