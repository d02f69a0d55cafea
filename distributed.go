package throttle

import (
	"fmt"
	"time"

	"github.com/throttlekit/throttle/internal/redisstore"
	"github.com/throttlekit/throttle/internal/store"
)

// waitError is the error of a reservation that is not ok: the wait it
// needed exceeds budget, for reason (ErrBeyondDeadline or
// ErrBeyondMaxWait).
func waitError(r *store.Reservation, budget time.Duration, reason error) *WaitError {
	return &WaitError{Rule: r.Buckets[r.Limiter].Rule, Wait: r.Wait, Budget: budget, Err: reason}
}

// checkRedisRules rejects rules the Redis store cannot run exactly: an
// interval under its one-microsecond resolution, or a bucket spanning more
// than redisstore.MaxSpanMicros.
func checkRedisRules(rules []Rule, headroom float64) error {
	crs, err := compileRules(rules, headroom)
	if err != nil {
		return err
	}
	for _, c := range crs {
		if c.interval < time.Microsecond {
			return &RuleError{Rule: c.Name, Field: "Limit.Rate", Reason: fmt.Sprintf(
				"%d per %v is more than one per microsecond, the resolution of the Redis store", c.Limit.Rate, c.Limit.Period)}
		}
		if redisstore.Micros(c.interval) > redisstore.MaxSpanMicros/c.burst {
			return &RuleError{Rule: c.Name, Field: "Limit.Period", Reason: fmt.Sprintf(
				"a bucket of %d × %v spans more than the Redis store's %v", c.burst, c.interval, time.Duration(redisstore.MaxSpanMicros)*time.Microsecond)}
		}
	}
	return nil
}
