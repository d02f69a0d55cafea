package throttle

import (
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// waitError is the error of a reservation that is not ok: the wait it
// needed exceeds budget, for reason (ErrBeyondDeadline or
// ErrBeyondMaxWait).
func waitError(r *store.Reservation, budget time.Duration, reason error) *WaitError {
	return &WaitError{Rule: r.Buckets[r.Limiter].Rule, Wait: r.Wait, Budget: budget, Err: reason}
}
