package throttle

import (
	"context"
	"sync"
	"time"
)

// waitQueue counts the requests of this process waiting in each bucket, to
// bound them (WithMaxQueue). Slots are handed out by the store in the order
// requests book them, and each waiter sleeps until its own slot, so waiters
// of one bucket depart in the order they booked: first in, first out.
type waitQueue struct {
	max int

	mu      sync.Mutex
	waiting map[string]int // bucket key → waiters; a key is deleted at zero
}

func newWaitQueue(max int) *waitQueue {
	return &waitQueue{max: max, waiting: make(map[string]int)}
}

// full returns a QueueFullError if any bucket of bs has the maximum number
// of waiters. Checking before booking keeps a full queue from booking slots
// it would only give back.
func (q *waitQueue) full(bs []bucket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.fullLocked(bs)
}

func (q *waitQueue) fullLocked(bs []bucket) error {
	for _, b := range bs {
		if n := q.waiting[b.key]; n >= q.max {
			return &QueueFullError{Rule: b.rule, Waiting: n}
		}
	}
	return nil
}

// enter counts a waiter in each of its buckets, or in none if any of them
// already has the maximum number of waiters.
func (q *waitQueue) enter(bs []bucket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fullLocked(bs); err != nil {
		return err
	}
	for _, b := range bs {
		q.waiting[b.key]++
	}
	return nil
}

// leave uncounts a request that entered.
func (q *waitQueue) leave(bs []bucket) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		if n := q.waiting[b.key] - 1; n > 0 {
			q.waiting[b.key] = n
		} else {
			delete(q.waiting, b.key)
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
