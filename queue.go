package throttle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// waitQueue holds the requests of this process that wait in each bucket.
//
// Slots are handed out by the store in the order requests book them, and
// each waiter sleeps until its own slot, so waiters of one bucket depart in
// the order they booked: first in, first out. The queue bounds the waiters
// of a bucket (WithMaxQueue), and paces their departures: a waiter never
// leaves less than its cost's worth of the rule's interval after the one
// before it. Without that, a stall of the process (a GC pause, a starved
// CPU) would release every waiter it delayed at once, and a strict server
// would see a burst the bucket never allowed. What a stall costs is then
// lost capacity, never a burst.
//
// A sliding counter's waiters are not paced. Its slots are its quota
// itself, often a window's whole quota at one instant (the window's
// start), and it counts a request in the window it leaves in, so one that
// leaves after its slot in that window is counted as booked. Paced by the
// interval, the waiters after the first would leave late, give back their
// slots and book again, and a sliding counter cannot take back a slot
// with later bookings behind it (it books in order, see
// algorithm.CounterAt): the slot is lost and the waiter queues a window
// later. Measured: a fleet of 32 goroutines at 20/s started 15 ms before
// a boundary sent 1-7 requests in its first window instead of 19
// (TestFleetWindowStartsBeforeABoundary's sliding-counter cells,
// 0.575-0.675 of the two windows after the boundary, 0.925 unpaced;
// TestWindowWaitersLeaveInTheirWindow). A fixed window's late waiter
// gives its count back and books again at once in the same window, so
// pacing costs it a round trip, not a slot; unpaced, the fixed window
// measured worse in TestFleetOutagePerAlgorithm/fixed (3 of 5 runs with
// 1-5 rejections and 0.60-0.86 of the quota, against 0 of 5 paced,
// 2026-12-07; cause not traced), so it stays paced.
type waitQueue struct {
	max int

	mu    sync.Mutex
	lanes map[string]*lane // bucket key → its waiters; deleted when none is left
	// held maps a bucket key to the end of a pause the server asked for
	// (Unix nanoseconds), until it has passed: see hold.
	held map[string]int64
	// waiting is the lanes' waiters summed, written under mu and read
	// without it by full: while it is below max no lane can be full, and
	// nearly every request then checks without the lock.
	waiting atomic.Int64
}

// lane is one bucket's waiters in this process.
type lane struct {
	waiting int
	last    int64 // when the last waiter departed, Unix nanoseconds; 0 if none yet
	// asleep holds the waiters asleep until their slots, for stretch.
	asleep map[*sleeper]struct{}
}

// sleeper is a waiter asleep until its slot, which a cap's stretch may
// move (see stretch).
type sleeper struct {
	slot   int64         // Unix nanoseconds; guarded by waitQueue.mu
	booked int64         // when the slot was booked, Unix nanoseconds
	moved  chan struct{} // capacity 1: told when slot moved
}

func newWaitQueue(max int) *waitQueue {
	return &waitQueue{max: max, lanes: make(map[string]*lane), held: make(map[string]int64)}
}

// hold records that the store paused buckets bs until until. A pause stops
// new bookings in the store, but the waiters of this process that booked
// before it would still leave on their slots, into the server's rejection;
// depart sends them back to book again instead. It is kept per bucket key,
// not per lane, so that a waiter whose booking raced the pause and enters
// its lane just after is held back too.
// Pauses that have passed by now are dropped, so that partitioned buckets
// leave no trail.
func (q *waitQueue) hold(bs []store.Bucket, now, until time.Time) {
	end := until.UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, e := range q.held {
		if e <= now.UnixNano() {
			delete(q.held, k)
		}
	}
	for _, b := range bs {
		q.held[b.Key] = max(q.held[b.Key], end)
	}
}

// holdWaiting is hold for the keys of a pause another replica published
// (Transport.heardPause), kept only for the keys this process has waiters
// in: a request that books later learns of the pause from the store, and a
// fleet of many partitioned buckets would otherwise keep every replica's
// pauses here. It returns the buckets of those keys.
func (q *waitQueue) holdWaiting(keys []string, until time.Time) []store.Bucket {
	end := until.UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	var held []store.Bucket
	for _, k := range keys {
		if _, ok := q.lanes[k]; ok {
			q.held[k] = max(q.held[k], end)
			held = append(held, store.Bucket{Key: k})
		}
	}
	return held
}

// heldLocked reports whether a waiter of bs whose slot is at slot (Unix
// nanoseconds) booked it before a pause of one of bs that ends later than
// slack after it, dropping the pauses that have passed. A slot within
// slack (the lateness tolerance) of the pause's end is the first after it:
// the pause's end here and in the store differ by the latency of the call
// that set it.
// q.mu must be held.
func (q *waitQueue) heldLocked(bs []store.Bucket, slot, now int64, slack time.Duration) bool {
	if len(q.held) == 0 {
		return false
	}
	held := false
	for _, b := range bs {
		end, ok := q.held[b.Key]
		switch {
		case !ok:
		case end <= now:
			delete(q.held, b.Key)
		case store.SatAdd(slot, int64(slack)) < end:
			held = true
		}
	}
	return held
}

// full returns a QueueFullError if any bucket of bs already has the maximum
// number of waiters. Checking before booking keeps a full queue from booking
// slots it would only give back; enter checks again, exactly.
func (q *waitQueue) full(bs []store.Bucket) error {
	if q.waiting.Load() < int64(q.max) {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil && l.waiting >= q.max {
			return &QueueFullError{Rule: b.Rule, Waiting: l.waiting}
		}
	}
	return nil
}

// enter counts a waiter in each of its buckets, or in none if any of them
// already has the maximum number of waiters.
func (q *waitQueue) enter(bs []store.Bucket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if n := q.waitingLocked(b.Key); n >= q.max {
			return &QueueFullError{Rule: b.Rule, Waiting: n}
		}
	}
	for _, b := range bs {
		l := q.lanes[b.Key]
		if l == nil {
			l = &lane{}
			q.lanes[b.Key] = l
		}
		l.waiting++
		q.waiting.Add(1)
	}
	return nil
}

func (q *waitQueue) waitingLocked(key string) int {
	if l := q.lanes[key]; l != nil {
		return l.waiting
	}
	return 0
}

// leave uncounts a waiter that entered.
func (q *waitQueue) leave(bs []store.Bucket) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil {
			q.waiting.Add(-1)
			if l.waiting--; l.waiting <= 0 {
				delete(q.lanes, b.Key)
			}
		}
	}
}

// anyLateness is depart's tolerance for a waiter that leaves on its slot
// however late it wakes (a request's last attempt).
const anyLateness time.Duration = -1

// errStretched reports a waiter whose slot a stretch (waitQueue.stretch)
// moved beyond the latest it may leave at: it fails at once, as a wait
// that long would have at its booking.
var errStretched = errors.New("throttle: the slot was stretched beyond the request's budget")

// depart sleeps until the waiter's slot, wait from now, then until it is
// paced behind the waiter that left before it, and marks its departure; it
// returns the slot, which a cap's stretch may have moved while the waiter
// slept (stretch). The caller must have entered bs. If tolerance ≥ 0 and
// the waiter wakes more than tolerance after its slot, it returns errLate
// without departing; it does too if a pause of one of bs (hold) ends more
// than tolerance after the slot, which was therefore booked before the
// pause: Transport.acquire books it again, after the pause. A waiter with
// tolerance anyLateness (or any other below 0) leaves on its slot whatever
// happened. A slot stretched beyond latest returns errStretched at once.
func (q *waitQueue) depart(ctx context.Context, c Clock, bs []store.Bucket, wait, tolerance time.Duration, latest time.Time) (time.Time, error) {
	booked := c.Now()
	z := q.fallAsleep(bs, booked.Add(wait).UnixNano(), booked.UnixNano())
	// The slot as booked is within the budget whatever latest says (the
	// wait counts from the store's decision, and a window's guard adds to
	// it): only a stretch beyond both fails.
	at, err := q.sleepUntilSlot(ctx, c, z, max(latest.UnixNano(), z.slot))
	q.wake(bs, z)
	slot := time.Unix(0, at)
	if err != nil {
		return slot, err
	}
	woke := c.Now()
	if tolerance >= 0 && woke.Sub(slot) > tolerance {
		return slot, errLate
	}
	now := woke.UnixNano()
	at = now
	q.mu.Lock()
	if tolerance >= 0 && q.heldLocked(bs, slot.UnixNano(), now, tolerance) {
		q.mu.Unlock()
		return slot, errLate
	}
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil && l.last != 0 && b.Algorithm != store.SlidingCounter {
			at = max(at, store.SatAdd(l.last, store.SatMul(int64(b.Interval), b.Cost)))
		}
	}
	if tolerance >= 0 && at-slot.UnixNano() > int64(tolerance) {
		// Paced behind the waiter before it in one of its lanes, it would
		// leave later than its tolerance as surely as if it had woken so
		// late (measured, on throttletest's fake clock, where nothing
		// wakes late: 64 workers across Stripe's endpoints had 1-6
		// requests refused by stripe-global in 7 runs of 16, none in 32
		// with this check).
		q.mu.Unlock()
		return slot, errLate
	}
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil {
			l.last = at
		}
	}
	q.mu.Unlock()
	return slot, sleep(ctx, c, time.Duration(at-now))
}

// fallAsleep registers a waiter of bs asleep until slot, booked at booked
// (both Unix nanoseconds), in each of its lanes, for stretch.
func (q *waitQueue) fallAsleep(bs []store.Bucket, slot, booked int64) *sleeper {
	z := &sleeper{slot: slot, booked: booked, moved: make(chan struct{}, 1)}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil {
			if l.asleep == nil {
				l.asleep = make(map[*sleeper]struct{})
			}
			l.asleep[z] = struct{}{}
		}
	}
	return z
}

// wake unregisters z from the lanes of bs.
func (q *waitQueue) wake(bs []store.Bucket, z *sleeper) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.Key]; l != nil {
			delete(l.asleep, z)
		}
	}
}

// sleepUntilSlot sleeps until z's slot, following it when a stretch moves
// it, and returns the slot it woke on. A slot beyond latest (Unix
// nanoseconds) returns errStretched without sleeping further.
func (q *waitQueue) sleepUntilSlot(ctx context.Context, c Clock, z *sleeper, latest int64) (int64, error) {
	for {
		q.mu.Lock()
		slot := z.slot
		q.mu.Unlock()
		if slot > latest {
			return slot, errStretched
		}
		d := time.Duration(slot - c.Now().UnixNano())
		if d <= 0 {
			return slot, nil
		}
		t := c.NewTimer(d)
		select {
		case <-t.C():
			q.mu.Lock()
			moved := z.slot != slot
			q.mu.Unlock()
			if !moved {
				// The timer is the slot: a wall clock read just after it
				// may still lie a little before it.
				return slot, nil
			}
		case <-z.moved:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return slot, ctx.Err()
		}
	}
}

// stretch re-times the waiters of this process asleep in keys' lanes as
// a store's Limit re-timed their slots (store.Stretch), from from (Unix
// nanoseconds, this process's clock): each slot later than from moves to
// from + (slot − from)·ratio. Only waiters that booked at or before booked
// are moved: a slot booked after the stretch was booked under the cap.
// Without it, a cut met with a queue booked at the rule's rate takes
// effect only after the queue, which meanwhile spends the server's window
// at the rule's rate (the store's next slot comes where it would have
// under the cap, but the slots before it still leave on their old times),
// and a raise leaves the queue at the cut's pace.
func (q *waitQueue) stretch(keys []string, st store.Stretch, from, booked int64) {
	if !st.Moves() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		l := q.lanes[k]
		if l == nil {
			continue
		}
		for z := range l.asleep {
			if z.booked > booked {
				continue
			}
			if at := st.At(z.slot, from); at != z.slot {
				z.slot = at
				select {
				case z.moved <- struct{}{}:
				default:
				}
			}
		}
	}
}

// sleep waits for d on clock c, or until ctx is done.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
