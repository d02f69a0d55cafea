package store

import (
	"context"
	"time"
)

// Quota is a bucket's room at a decision, as a server's rate-limit headers
// tell it to its clients (the middleware package): what could still depart
// at once, and when the whole quota is back.
type Quota struct {
	// Remaining is the units of cost that could depart now, after the
	// decision's booking: 0 to the bucket's Burst (its quota per window for
	// a window bucket).
	Remaining int64
	// Reset is the time from the decision until the bucket could take a
	// request of its whole Burst at once (for a leaky or token bucket, until
	// it is empty; for a fixed window, until the window holding its counts
	// has ended): 0 for a bucket with its whole quota free.
	Reset time.Duration
}

// Quoter is a store that reports each bucket's Quota with a reservation,
// read under the same lock (or in the same script) as the booking, so the
// two agree. The in-process store implements it.
type Quoter interface {
	// ReserveQuota is Reserve, and returns beside the reservation the
	// Quota of each bucket of bs after it (indexed as bs), whether or not
	// the request was booked.
	ReserveQuota(ctx context.Context, bs []Bucket, maxWait time.Duration) (Reservation, []Quota, error)
}

// QuotaReader is a store that reads its buckets' room in a call of its
// own, after the reservation (the Redis store: its reserve script replies
// with no room). Between the two calls other requests may book: the room
// read is then theirs too, which a server's headers may tell.
type QuotaReader interface {
	// Quotas returns the Quota of each bucket of bs at the store's now,
	// indexed as bs.
	Quotas(ctx context.Context, bs []Bucket) ([]Quota, error)
}
