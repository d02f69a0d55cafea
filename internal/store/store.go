// Package store is the seam between the Transport and where its buckets
// live: the Store interface every store implements (the Transport's own in
// this process, the Redis store, the outage store around it), the Bucket a
// request needs and the Reservation a store answers with, which owns its
// undo. It also holds the small helpers several stores share: the sweep
// policy for idle entries and saturating arithmetic.
//
// It imports nothing of the module, so every store can import it and none
// needs another's internals.
package store

import (
	"context"
	"errors"
	"math"
	"time"
)

// ErrUnavailable reports that the shared store could not be reached and the
// outage mode fails closed. The root package exports it as
// ErrStoreUnavailable.
var ErrUnavailable = errors.New("throttle: store unavailable")

// Store books slots in buckets. It is the one seam between the Transport and
// where buckets live: in this process (internal/localstore) or in Redis, shared by a
// fleet (internal/redisstore), behind the outage store (internal/outage). All keep the same semantics, given here.
//
// Implementations must be safe for concurrent use.
type Store interface {
	// Reserve books one slot in every bucket of bs, all or nothing, if the
	// request can depart within maxWait, and returns the wait until it may
	// depart. Each leaky or token bucket is booked at the request's
	// earliest time in it; the request departs at the earliest time at or
	// after all of those at which every window bucket (Algorithm.Windowed)
	// has room too, and is counted there in each window bucket. When the wait
	// would exceed maxWait nothing is booked and the reservation has ok
	// false and the wait that would have been needed. An error means the
	// store could not decide; nothing was booked. The reservation gives
	// its booking back itself (Reservation.Cancel).
	Reserve(ctx context.Context, bs []Bucket, maxWait time.Duration) (Reservation, error)

	// Pause holds every bucket of bs shut for d from the store's now: the
	// next request departs no earlier, and the bucket refills from empty.
	Pause(ctx context.Context, bs []Bucket, d time.Duration) error

	// Limit caps bucket b as c says, from the store's now, replacing any
	// cap in force; it never loosens the rule. While a cap (even one of
	// rate 0, which caps nothing) is in force, the store counts the units
	// the replicas report sent in the bucket (Bucket.Sent, added when a
	// request is booked) and reports the count with every reservation
	// (Reservation.Counts): the fleet's own traffic, which internal/feedback
	// sets against what the server says it counted.
	// A cap paces what books after it; one that retimes (Cap.Retime) and
	// slows a leaky or token bucket also stretches the slots it has booked
	// ahead, and Limit returns that stretch, so that the caller can re-time
	// the waiters that hold them (see Stretch).
	Limit(ctx context.Context, b Bucket, c Cap) (Stretch, error)

	// Held returns how long a pause (see pause) still holds any bucket of
	// bs, or 0.
	Held(ctx context.Context, bs []Bucket) (time.Duration, error)
}

// Cap is a cap for Store.Limit: rate units of cost per second from the
// store's now (0: no cap, count only), climbing by slope per second, for
// span.
//
// Debt is what the fleet has sent beyond the cap's pace since the store
// began counting, in units of cost (internal/feedback: the first window of
// a quota shared with others). It is a high-water mark of the count: the
// store pushes a leaky or token bucket's next slot later by the part of it
// that no Limit since the count began has paid, at the capped interval, so
// that replicas that read the same count pay it once. A window bucket
// ignores it. PayBy, when not 0, is when from the store's now the debt is
// due: a push never takes the next slot past it. internal/feedback sets it
// to the first window's end, when what the fleet sent early begins to
// leave the server's window: a slot pushed past it holds back nothing that
// window counts (a fleet of 8 × 16 whose queue already reached past the
// first window's end pushed its next slots up to 0.3 s further, and sent
// nothing for 0.6 s of its second second).
//
// Retime asks, of a cap that slows the bucket, that the slots it has
// booked ahead stretch to the cap's pace and their waiters follow them
// (Stretch); without it the cap paces only what books after it.
// internal/feedback sets it for a rejection's cap, whose window is full
// for sure. A success's reading may be off by its slack: re-timing a whole
// queue on it made a false cut cost a fleet alone on its quota most of a
// second, and stretching the lead alone at every dip of caps that wander,
// which no raise undid, ratcheted the queue later (see limit.lua).
type Cap struct {
	Rate   float64
	Slope  float64
	Span   time.Duration
	Debt   float64
	PayBy  time.Duration
	Retime bool
}

// Stretch is what a Store.Limit of a cap that retimes (Cap.Retime) and
// slows a leaky or token bucket did to the slots it had booked ahead: each
// slot s later than From (the store's now, or the end of the bucket's
// pause, as an offset from the store's now) moved to From + (s − From)·
// Ratio, the new interval over the old, so that the next slot comes where
// it would have had they all been booked under the cap. The slots'
// waiters, which sleep on their old times in every replica, are re-timed
// alike (the Transport's queue; other replicas hear of it on the Redis
// store's pause channel). The zero value, Ratio 0, moves nothing; so does
// 1. The stores never compress (a Ratio below 1), but the type and the
// queue handle it.
type Stretch struct {
	From  time.Duration
	Ratio float64
}

// Moves reports whether s moves any slot.
func (s Stretch) Moves() bool { return s.Ratio > 0 && s.Ratio != 1 }

// At returns where a slot booked at slot (Unix nanoseconds, on the
// caller's clock) moves to when the stretch starts at from (the same
// clock): itself when it lies at or before from, or when s moves nothing.
func (s Stretch) At(slot, from int64) int64 {
	if !s.Moves() || slot <= from {
		return slot
	}
	lead := math.Ceil(float64(slot-from) * s.Ratio)
	if lead >= math.MaxInt64 {
		return math.MaxInt64
	}
	return SatAdd(from, int64(lead))
}

// Algorithm is how a bucket decides (see the root's algorithm.go and
// internal/algorithm). Its values are the codes the Redis scripts dispatch
// on, so they never change; the zero value is the leaky bucket.
type Algorithm uint8

// The algorithms of a bucket.
const (
	LeakyBucket    Algorithm = 0 // GCRA: a TAT per bucket
	TokenBucket    Algorithm = 1 // GCRA's maths, emptied by a pause
	FixedWindow    Algorithm = 2 // a count per window of Period, at Anchor + k·Period
	SlidingLog     Algorithm = 3 // a timestamp per unit of cost departed in the last Period
	SlidingCounter Algorithm = 4 // the current and previous windows' counts, weighted
)

// Windowed reports whether a is one of the window algorithms, whose
// Burst is the window's quota and whose Period and Anchor place the
// windows.
func (a Algorithm) Windowed() bool { return a >= FixedWindow }

// Edged reports whether a counts a request in the window it departs in
// (the fixed window, the sliding counter), so that its buckets keep an
// Edge before each window's end (see Bucket.Edge).
func (a Algorithm) Edged() bool { return a == FixedWindow || a == SlidingCounter }

// Bucket is one Bucket a request needs, with the parameters of its rule.
type Bucket struct {
	Key      string        // unique within a Transport: the rule name, then the hashed partition key
	Rule     string        // the rule's name, for errors
	Interval time.Duration // emission interval per unit of cost
	Burst    int64         // capacity, in units of cost
	Cost     int64         // this request's weight, 1 ≤ cost ≤ burst
	// Lateness is how late after its slot a waiter may still leave: the
	// jitter the rule's headroom pays for (see the root's leaky.go).
	Lateness time.Duration
	// Corrected is set when the rule corrects its requests' costs from
	// the server's answers (the root's Rule.ActualCost): only such a
	// bucket can hold a credit (see Charger), which a request that would
	// queue then looks for.
	Corrected bool
	// Rate per period is the rule's Limit as written, and headroom the
	// rule's headroom: what internal/feedback reads the server's answers
	// against.
	Rate     int64
	Period   time.Duration
	Headroom float64
	// Sent is the units of cost this process Sent in the bucket since it
	// last reported them to the store: reserve adds them to the bucket's
	// count (see Store.Limit) when it books the request.
	Sent int64
	// Algorithm is the rule's algorithm. For the window algorithms
	// (Algorithm.Windowed) Burst is the quota per window (the rule's Rate
	// less its headroom), Interval the rule's Period/Rate (what a feedback
	// cap compares with), Lateness is not used (a window bucket is booked
	// at the departure, never deferred), and Period is the window.
	Algorithm Algorithm
	// Anchor places a FixedWindow's boundaries at the Unix epoch + Anchor
	// + k·Period: 0 puts them on multiples of Period since the epoch (an
	// hourly window then resets on the hour, as GitHub's does). A root
	// that learns the server's reset instant R from its headers sets
	// Anchor to R mod Period (any value is taken modulo Period).
	Anchor time.Duration
	// Edge is the span at either end of each of a FixedWindow's or
	// SlidingCounter's windows in which the stores book nothing in that
	// window (algorithm.FixedAt, algorithm.CounterAt): a request asked
	// for in a window's last Edge is booked in the next, one asked for in
	// its first Edge at that Edge's end. A request booked just before a
	// boundary reaches the server after it, which counts it in the next
	// window (a fixed window's beside that window's whole quota, a
	// sliding counter's at full weight); one booked just after it reaches
	// a server whose clock lags the fleet's before it, in a window the
	// fleet may have filled. 0 for none; the stores take it below half
	// the Period, and ignore it for the sliding log and the buckets.
	Edge time.Duration
}

// WindowMicros returns a window bucket's window in µs (Period rounded up,
// at least 1), for a FixedWindow its Anchor within [0, window), and for a
// FixedWindow or a SlidingCounter its Edge, below the window, in µs;
// anchor is 0 for the other algorithms, edge 0 for the sliding log. Every
// store places windows by these, the Redis store's scripts included, so
// that they agree to the microsecond.
func (b *Bucket) WindowMicros() (period, anchor, edge int64) {
	period = max(ceilMicros(b.Period), 1)
	if b.Algorithm == FixedWindow {
		anchor = (int64(b.Anchor/time.Microsecond)%period + period) % period
	}
	if b.Algorithm.Edged() {
		// Below half the window, so that a window keeps a slot between
		// its two edges.
		edge = min(ceilMicros(max(b.Edge, 0)), (period-1)/2)
	}
	return period, anchor, edge
}

func ceilMicros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return us
}

// Reservation is a store's answer to reserve. It owns its undo, as
// golang.org/x/time/rate's Reservation owns its limiter: cancel gives the
// booking back in whichever store made it, so no store needs to tell from
// the Reservation's shape who made it. A Reservation is a value and may be
// copied: every copy names the same booking (undo is a pointer, or a value
// naming the booking by an identity of its own, never the address of a
// slice element), and the booking goes back at most once, whichever copy
// cancels it and however often.
type Reservation struct {
	// OK is set when the request is booked (or deferred, see Deferred).
	OK      bool
	Wait    time.Duration // until departure when ok; the wait needed when not
	Limiter int           // index in buckets of the bucket that set the wait
	// Buckets are the request's buckets, as the Transport passed them.
	Buckets []Bucket
	// Deferred holds the indices in buckets of the buckets not booked now,
	// in order, or nil: those whose slot comes longer before the departure
	// than the bucket's lateness tolerance. Booking them ahead of time
	// would either waste their capacity until the departure or let the
	// request leave later than they counted it; the Transport books them
	// at the departure, in a second call (see Rest).
	Deferred []int
	// Counts holds, for each bucket the store counts (see Store.Limit), 1
	// plus the units the fleet reported sent in it so far, this request's
	// report (Bucket.Sent) included; 0 for a bucket not counted or
	// deferred. It may be nil when none is counted. Only differences of
	// counts mean anything.
	Counts []int64
	// Held, when not 0, is how long from the store's decision a pause
	// lasts in one of the buckets (the latest end, if several): one that a
	// response told this process or another replica of (Store.Pause). The
	// Transport sends its waiters booked before the pause to book again
	// after it (waitQueue.hold). The Redis store reports it; the local
	// store, whose one process already holds its waiters, does not.
	Held time.Duration
	// Queued is how long the call waited in the store's client before it
	// went to the server (the Redis store's batcher queue), 0 when it went
	// at once or the store cannot tell: the decision came no earlier than
	// that after the call. The Transport reckons the decision's moment
	// from it (see Transport.acquireOnce).
	Queued time.Duration
	// Unreported is set when the store took no report of units sent
	// (Bucket.Sent) with the booking: the outage store booked it in an
	// outage mode (local share buckets, or fail open), which keeps no
	// counts.
	Unreported bool
	// Marks holds, for each leaky or token bucket booked, the store's mark
	// of this booking (the bucket's TAT after it, in the store's own time
	// units), to pass to Charger.Charge with a correction of the request's
	// cost; 0 for a bucket deferred or not marked. It may be nil: the
	// charge then bounds nothing by the booking (no credit, see Charger).
	Marks []int64
	// Undo gives the booking back (see Cancel); nil when nothing was
	// booked that could go back.
	Undo Undo
}

// Undo gives a booking back. Each store makes its own, holding what it needs
// to find the booking again. Cancel gives back the booking's slot in every
// leaky or token bucket where it is still the last one booked: a slot with
// later bookings behind it stays spent, and the requests behind keep their
// place in the queue. A window bucket always gets the cost back while its
// window is kept (fewer counted only lowers what later requests were
// admitted under); the slot of a cap's constraint on it stays spent. It does so once: later calls, from any copy of the reservation,
// do nothing and return nil. An error means the store could not be told;
// the slots it could not reach stay spent, which errs on the side of the
// limit.
type Undo interface {
	Cancel(ctx context.Context) error
}

// Gate is how a store that passes on the reservations of the store it
// wraps (the outage store around the Redis store) runs their refunds: its
// own way (only while the inner store is believed reachable, within its
// timeout), refund being the inner store's.
type Gate interface {
	Refund(ctx context.Context, refund func(context.Context) error) error
}

// Gated is an Undo that can take such a Gate itself, so that the store
// passing it on needs no Undo of its own around it (an allocation a
// request). Gated sets g as the gate of every later Cancel, which stays
// once for all copies, and returns the Undo to pass on; the store the
// reservation came to calls it once, before the reservation leaves it.
type Gated interface {
	Undo
	Gated(g Gate) Undo
}

// Cancel gives r's booking back (see undo). It is safe to call on any copy
// of r, any number of times, and on a reservation that booked nothing.
func (r *Reservation) Cancel(ctx context.Context) error {
	if r.Undo == nil {
		return nil
	}
	return r.Undo.Cancel(ctx)
}

// Count returns the Count of bucket i (see counts), or 0.
func (r *Reservation) Count(i int) int64 {
	if i < len(r.Counts) {
		return r.Counts[i]
	}
	return 0
}

// IsDeferred reports whether bucket i was deferred (see deferred).
func (r *Reservation) IsDeferred(i int) bool {
	for _, j := range r.Deferred {
		if j == i {
			return true
		}
	}
	return false
}

// Reported reports whether the store took bucket i's report of units sent
// (Bucket.Sent): it did when it booked the bucket now in a store that keeps
// counts.
func (r *Reservation) Reported(i int) bool {
	return r.OK && !r.Unreported && i < len(r.Buckets) && !r.IsDeferred(i)
}

// Rest returns the buckets of r not booked yet (see deferred), or nil.
func (r *Reservation) Rest() []Bucket {
	if len(r.Deferred) == 0 {
		return nil
	}
	rest := make([]Bucket, len(r.Deferred))
	for j, i := range r.Deferred {
		rest[j] = r.Buckets[i]
	}
	return rest
}

// Idle buckets are dropped by sweeps. A bucket whose TAT has passed equals a
// new one, so dropping it never changes a decision. A sweep copies the live
// buckets into a new map (Go maps do not shrink) and runs when the map has
// doubled since the last sweep, or SweepEvery after it, whichever comes
// first: its O(n) cost is spread over at least n/2 insertions or a minute.
const (
	// SweepEvery is the longest time between sweeps of a map that is not
	// empty.
	SweepEvery = time.Minute
	// SweepMinSize is the smallest map size that is due a sweep for its size.
	SweepMinSize = 1024
)

// Sweeper is that sweep policy, for a map of idle entries; times are Unix
// nanoseconds. The local store and the outage store's local buckets share
// it.
type Sweeper struct {
	size int   // sweep when the map reaches this size
	at   int64 // time of the last sweep
}

// NewSweeper returns the policy for a map last swept (or made) at now.
func NewSweeper(now int64) Sweeper { return Sweeper{size: SweepMinSize, at: now} }

// Due reports whether a map of n entries is due a sweep at now.
func (w *Sweeper) Due(n int, now int64) bool {
	return n >= w.size || (n > 0 && now-w.at >= int64(SweepEvery))
}

// Swept records a sweep at now that left live entries.
func (w *Sweeper) Swept(live int, now int64) {
	w.size = max(2*live, SweepMinSize)
	w.at = now
}

// SatMul returns a·b for non-negative a and b, saturating at MaxInt64.
func SatMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// SatAdd returns a+b for b ≥ 0, saturating at MaxInt64.
func SatAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Charger is a store that can correct the cost a request was booked at,
// once the server has said what it really cost (see the root's
// Rule.ActualCost). The stores of this module implement it.
type Charger interface {
	// Charge books units more of cost (units > 0) in bucket b, from the
	// store's now: a credit the bucket holds (below) pays first, then the
	// bucket's next free slot moves later by the rest, from now if the
	// bucket had room. A negative units is a refund. A bucket with no
	// request booked ahead of now takes it in its next free slot, earlier
	// by -units, never before now; a bucket with room already gets
	// nothing (its capacity for the past is gone). A bucket with requests
	// booked ahead (a queue) takes it as a credit instead: room the server
	// holds now and the queue's slots do not count, which the next request
	// of the bucket that would wait takes at once, without moving the
	// queue (docs/CONCURRENCY.md, "Credits"). The credit is bounded by
	// mark, the request's Reservation.Marks entry, and lapses as the
	// server's bucket refills to its capacity; a mark of 0 gives none.
	// A window bucket (Algorithm.Windowed) is left as it is. An error
	// means the store could not be told; the bucket keeps the estimate.
	Charge(ctx context.Context, b Bucket, units, mark int64) error
}
