package redisstore

import (
	"context"
	"sync"
)

// quotaBatch sends the quota.lua reads of concurrent requests together,
// as scriptBatcher does their reservations: a read that finds fewer than
// maxInFlight calls on the wire goes at once, with the reads queued
// behind earlier ones, as one call of all their keys (they share the
// namespace's hash tag), and the caller whose call comes back sends the
// queue as it then stands. One dispatch and one TIME then serve every
// read of the batch: Redis's time per read is what the room read costs a
// busy server. A read is read-only, so one whose caller left is simply
// dropped. The zero quotaBatch is ready.
type quotaBatch struct {
	mu       sync.Mutex
	queue    []*quotaCall
	inFlight int
}

// quotaCall is one read waiting in the batch, and its result.
type quotaCall struct {
	read quotaRead
	done chan struct{}
	vals []string
	now  int64
	err  error
}

// read returns the values of q's keys and Redis's now, batched with the
// reads of other callers.
func (b *quotaBatch) read(ctx context.Context, s *Store, q quotaRead) ([]string, int64, error) {
	c := &quotaCall{read: q, done: make(chan struct{})}
	b.mu.Lock()
	if b.inFlight >= maxInFlight {
		b.queue = append(b.queue, c)
		b.mu.Unlock()
		select {
		case <-c.done:
			return c.vals, c.now, c.err
		case <-ctx.Done():
			// The call, read-only, goes on for the others; its result
			// for c is dropped.
			return nil, 0, ctx.Err()
		}
	}
	b.inFlight++
	batch := append(b.takeLocked(), c)
	b.mu.Unlock()
	// The caller sends its own call and those queued, then, while more
	// queued meanwhile, theirs: its context bounds each call (the outage
	// store's bound), and a caller whose context ended leaves that work to
	// the next one in.
	for {
		b.send(ctx, s, batch)
		b.mu.Lock()
		if len(b.queue) == 0 || ctx.Err() != nil {
			b.inFlight--
			b.mu.Unlock()
			if ctx.Err() != nil {
				b.release()
			}
			return c.vals, c.now, c.err
		}
		batch = b.takeLocked()
		b.mu.Unlock()
	}
}

// maxQuotaBatch bounds the reads of one quota.lua call, so that one call
// never holds Redis long: the rest wait for the next.
const maxQuotaBatch = 128

// takeLocked takes the first reads of the queue, at most maxQuotaBatch.
// b.mu must be held.
func (b *quotaBatch) takeLocked() []*quotaCall {
	n := min(len(b.queue), maxQuotaBatch)
	batch := make([]*quotaCall, n, n+1)
	copy(batch, b.queue)
	b.queue = append(b.queue[:0:0], b.queue[n:]...)
	return batch
}

// release hands the queue, if any, to a new sender of its own after a
// sender left with its context ended, so no queued read waits for a call
// never sent.
func (b *quotaBatch) release() {
	b.mu.Lock()
	queue := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, c := range queue {
		c.err = context.Canceled
		close(c.done)
	}
}

// send runs one quota.lua call of the keys of every read of batch and
// delivers each its values.
func (b *quotaBatch) send(ctx context.Context, s *Store, batch []*quotaCall) {
	rs := make([]quotaRead, len(batch))
	for i, c := range batch {
		rs[i] = c.read
	}
	vals, now, err := s.readQuotas(ctx, rs)
	at := 0
	for _, c := range batch {
		n := len(c.read.keys)
		if err == nil {
			c.vals, c.now = vals[at:at+n:at+n], now
		} else {
			c.err = err
		}
		at += n
		close(c.done)
	}
}
