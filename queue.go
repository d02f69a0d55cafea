package throttle

import (
	"context"
	"sync"
	"time"
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
type waitQueue struct {
	max int

	mu    sync.Mutex
	lanes map[string]*lane // bucket key → its waiters; deleted when none is left
	// held maps a bucket key to the end of a pause the server asked for
	// (Unix nanoseconds), until it has passed: see hold.
	held map[string]int64
}

// lane is one bucket's waiters in this process.
type lane struct {
	waiting int
	last    int64 // when the last waiter departed, Unix nanoseconds; 0 if none yet
	// warps are the latest re-timings of the bucket's booked future (see
	// warp), numbered from gen-len(warps)+1 to gen; changed is closed and
	// replaced at each, to wake the sleeping waiters.
	warps   []warp
	gen     uint64
	changed chan struct{}
}

// warp is one re-timing: every slot after at moved to at + (slot-at)·k.
type warp struct {
	at int64
	k  float64
}

// maxWarps bounds the re-timings a lane keeps for waiters that slept
// through several: a waiter that missed more keeps its slot, which is
// never early (see warp).
const maxWarps = 16

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
func (q *waitQueue) hold(bs []bucket, now, until time.Time) {
	end := until.UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, e := range q.held {
		if e <= now.UnixNano() {
			delete(q.held, k)
		}
	}
	for _, b := range bs {
		q.held[b.key] = max(q.held[b.key], end)
	}
}

// heldLocked reports whether a waiter of bs whose slot is at slot (Unix
// nanoseconds) booked it before a pause of one of bs that ends later than
// slack after it, dropping the pauses that have passed. A slot within
// slack (the lateness tolerance) of the pause's end is the first after it:
// the pause's end here and in the store differ by the latency of the call
// that set it.
// q.mu must be held.
func (q *waitQueue) heldLocked(bs []bucket, slot, now int64, slack time.Duration) bool {
	if len(q.held) == 0 {
		return false
	}
	held := false
	for _, b := range bs {
		end, ok := q.held[b.key]
		switch {
		case !ok:
		case end <= now:
			delete(q.held, b.key)
		case satAdd(slot, int64(slack)) < end:
			held = true
		}
	}
	return held
}

// full returns a QueueFullError if any bucket of bs already has the maximum
// number of waiters. Checking before booking keeps a full queue from booking
// slots it would only give back; enter checks again, exactly.
func (q *waitQueue) full(bs []bucket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.key]; l != nil && l.waiting >= q.max {
			return &QueueFullError{Rule: b.rule, Waiting: l.waiting}
		}
	}
	return nil
}

// enter counts a waiter in each of its buckets, or in none if any of them
// already has the maximum number of waiters.
func (q *waitQueue) enter(bs []bucket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if n := q.waitingLocked(b.key); n >= q.max {
			return &QueueFullError{Rule: b.rule, Waiting: n}
		}
	}
	for _, b := range bs {
		l := q.lanes[b.key]
		if l == nil {
			l = &lane{}
			q.lanes[b.key] = l
		}
		l.waiting++
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
func (q *waitQueue) leave(bs []bucket) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if l := q.lanes[b.key]; l != nil {
			if l.waiting--; l.waiting <= 0 {
				delete(q.lanes, b.key)
			}
		}
	}
}

// warp re-times the waiters of bucket key: the store scaled the bucket's
// booked future by k from at (Unix ns) because its cap changed (see
// store.limit), so every slot s after at is now at + (s-at)·k. The store
// scaled its TAT alike, so that new bookings follow the re-timed slots.
// Only this process's waiters learn of it: the others' keep their slots,
// which errs towards the limit on a raise (they go later than they may) and
// on a cut front-loads the lead they had booked at the old rate, no more
// than without the warp.
func (q *waitQueue) warp(key string, at time.Time, k float64) {
	if k <= 0 || k == 1 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lanes[key]
	if l == nil {
		return
	}
	if len(l.warps) == maxWarps {
		l.warps = append(l.warps[:0], l.warps[1:]...)
	}
	l.warps = append(l.warps, warp{at: at.UnixNano(), k: k})
	l.gen++
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// watchLocked returns the lane of key's warp generation and a channel
// closed at its next warp, or nil when key has no lane. q.mu must be held.
func (q *waitQueue) watchLocked(key string) (uint64, chan struct{}) {
	l := q.lanes[key]
	if l == nil {
		return 0, nil
	}
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.gen, l.changed
}

// rewarp returns slot re-timed by the warps of key's lane after
// generation gen, and the lane's generation. q.mu must be held.
func (q *waitQueue) rewarpLocked(key string, slot int64, gen uint64) (int64, uint64) {
	l := q.lanes[key]
	if l == nil {
		return slot, gen
	}
	first := l.gen - uint64(len(l.warps)) + 1
	if gen+1 < first {
		return slot, l.gen // slept through more than the lane keeps
	}
	for i := gen + 1; i <= l.gen; i++ {
		w := l.warps[i-first]
		if slot > w.at {
			slot = w.at + int64(float64(slot-w.at)*w.k)
		}
	}
	return slot, l.gen
}

// sleepToSlot sleeps until slot, re-timed by the warps of bucket key (the
// bucket that set the request's departure) while it sleeps, or until ctx
// is done, and returns the slot it slept to.
func (q *waitQueue) sleepToSlot(ctx context.Context, c Clock, key string, slot time.Time) (time.Time, error) {
	q.mu.Lock()
	gen, changed := q.watchLocked(key)
	q.mu.Unlock()
	for {
		d := slot.Sub(c.Now())
		if d <= 0 {
			return slot, nil
		}
		t := c.NewTimer(d)
		select {
		case <-t.C():
			return slot, nil
		case <-ctx.Done():
			t.Stop()
			return slot, ctx.Err()
		case <-changed:
			t.Stop()
			q.mu.Lock()
			var at int64
			at, gen = q.rewarpLocked(key, slot.UnixNano(), gen)
			slot = time.Unix(0, at)
			gen2, ch := q.watchLocked(key)
			if gen2 != gen {
				// A warp between the two looks: take it on the next turn.
				ch = closedChan
			}
			changed = ch
			q.mu.Unlock()
		}
	}
}

// closedChan is a channel that is always ready.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// depart sleeps until the waiter's slot, wait from now (re-timed by the
// warps of its limiter bucket, bs[limiter], see warp), then until it is
// paced behind the waiter that left before it, and marks its departure. The
// caller must have entered bs. If tolerance ≥ 0 and the waiter wakes more
// than tolerance after its slot, it returns errLate without departing; it
// does too if a pause of one of bs (hold) ends more than tolerance after
// the slot, which was therefore booked before the pause: Transport.acquire
// books it again, after the pause. A waiter with tolerance < 0 (the last
// attempt) leaves on its slot whatever happened.
func (q *waitQueue) depart(ctx context.Context, c Clock, bs []bucket, limiter int, wait, tolerance time.Duration) error {
	slot, err := q.sleepToSlot(ctx, c, bs[limiter].key, c.Now().Add(wait))
	if err != nil {
		return err
	}
	woke := c.Now()
	if tolerance >= 0 && woke.Sub(slot) > tolerance {
		return errLate
	}
	now := woke.UnixNano()
	at := now
	q.mu.Lock()
	if tolerance >= 0 && q.heldLocked(bs, slot.UnixNano(), now, tolerance) {
		q.mu.Unlock()
		return errLate
	}
	for _, b := range bs {
		if l := q.lanes[b.key]; l != nil && l.last != 0 {
			at = max(at, satAdd(l.last, satMul(int64(b.interval), b.cost)))
		}
	}
	for _, b := range bs {
		if l := q.lanes[b.key]; l != nil {
			l.last = at
		}
	}
	q.mu.Unlock()
	return sleep(ctx, c, time.Duration(at-now))
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
