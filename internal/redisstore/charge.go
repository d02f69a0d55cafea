package redisstore

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

var (
	//go:embed charge.lua
	chargeLua    string
	chargeScript = redis.NewScript(bucketLua + chargeLua)
)

var _ store.Charger = (*Store)(nil)

// Charge books units more of cost in bucket b in Redis (see
// store.Charger), one charge.lua call. mark is the request's
// store.Reservation.Marks entry from this store, in µs of Redis's clock.
func (s *Store) Charge(ctx context.Context, b store.Bucket, units, mark int64) error {
	if units == 0 || b.Algorithm.Windowed() {
		// A window bucket counts a request in the window it departed in,
		// which a correction would have to find again: the root does not
		// ask (Rule.ActualCost is for leaky and token buckets).
		return nil
	}
	limit := MaxSpanMicros / max(Micros(b.Interval), 1)
	units = min(max(units, -limit), limit)
	_, err := s.runScript(ctx, store.CallCharge, chargeScript, []string{s.key(&b)}, s.nowArg(), Micros(b.Interval), units, b.Burst, max(mark, 0))
	return err
}
