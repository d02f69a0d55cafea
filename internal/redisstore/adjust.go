package redisstore

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

var (
	//go:embed adjust.lua
	adjustLua    string
	adjustScript = redis.NewScript(bucketLua + adjustLua)
)

var _ store.Adjuster = (*Store)(nil)

// Adjust corrects bucket b by delta units of cost in Redis (see
// store.Adjuster), one adjust.lua call.
func (s *Store) Adjust(ctx context.Context, b store.Bucket, delta int64) error {
	if delta == 0 {
		return nil
	}
	maxDelta := MaxSpanMicros / max(Micros(b.Interval), 1)
	delta = min(max(delta, -maxDelta), maxDelta)
	_, err := s.runScript(ctx, "adjust", adjustScript, []string{s.key(&b)}, s.nowArg(), Micros(b.Interval), delta)
	return err
}
