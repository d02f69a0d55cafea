package throttle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptBatcher sends the reserve.lua calls of concurrent requests to Redis
// together: calls that arrive while earlier ones are on the wire queue up
// and leave as one pipeline, one write and one read for the lot. Each call
// is still its own EVALSHA, atomic on its own; only the round trips and
// system calls are shared. A lone caller sends its call at once on its own
// goroutine, so one request at a time costs exactly one round trip and no
// goroutine switch.
//
// The pipeline of a queue is sent by one of its callers, the leader: the
// caller that found fewer than maxInFlight pipelines in flight, or, when a
// pipeline comes back with callers queued behind it, the first of them,
// woken to take the queue as it then stands (the longer it waited, the
// deeper the batch). With guard set (a client that ignores context
// deadlines, see honoursDeadlines) pipelines run on a goroutine of their
// own, which sends the queue again each time one comes back, so that every
// caller waits no longer than its context allows.
//
// A caller whose context ends while its call is queued leaves, and the call
// is never sent; once sent, the caller may still leave, and a booking that
// arrives after it is refunded (see redisStore.late). Either way the call's
// memory then belongs to the batcher, which pools it when done with it.
type scriptBatcher struct {
	rdb   redis.UniversalClient
	guard bool
	// late receives each call whose caller left after it was sent, with its
	// reply; it must not keep c.
	late func(c *scriptCall, reply string, err error)

	mu       sync.Mutex
	queue    []*scriptCall
	spare    []*scriptCall // the previous queue's array, reused
	inFlight int
}

// maxInFlight bounds the pipelines in flight at once. Two keep Redis busy
// while the client reads one reply and writes the next batch; more split the
// queue into shallower batches, which costs more round trips for nothing.
const maxInFlight = 2

// The life of a scriptCall in the batcher (scriptCall.state).
const (
	callQueued    int32 = iota // in the queue, not sent
	callTaken                  // in a pipeline
	callLeading                // woken to send the queue
	callGaveUp                 // its caller left before it was sent: dropped
	callAbandoned              // its caller left after it was sent: late gets it
	callDone                   // its reply is in, its caller told
)

// do sends c's arguments (one EVALSHA) and returns the reply, a string or an
// error. c belongs to the batcher from then on: the caller must not touch it
// after do returns.
func (b *scriptBatcher) do(ctx context.Context, c *scriptCall) (string, error) {
	b.mu.Lock()
	if b.inFlight < maxInFlight {
		b.inFlight++
		b.mu.Unlock()
		c.state.Store(callTaken)
		if b.guard {
			go b.drain([]*scriptCall{c})
			return b.wait(ctx, c)
		}
		b.send(ctx, c, nil)
		reply, err := c.reply, c.err
		b.handOff()
		putScriptCall(c)
		return reply, err
	}
	c.state.Store(callQueued)
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	return b.wait(ctx, c)
}

// wait waits for c's reply, or for its turn to lead, or for ctx to end.
func (b *scriptBatcher) wait(ctx context.Context, c *scriptCall) (string, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callGaveUp) ||
			c.state.CompareAndSwap(callTaken, callAbandoned) {
			return "", context.Cause(ctx)
		}
		// Its reply or its turn to lead came in just now.
		<-c.ready
	}
	if c.state.Load() == callLeading {
		return b.lead(ctx, c)
	}
	reply, err := c.reply, c.err
	putScriptCall(c)
	return reply, err
}

// lead sends the queue, c's call included unless c's caller has already
// given up, then passes the lead on.
func (b *scriptBatcher) lead(ctx context.Context, c *scriptCall) (string, error) {
	batch := b.take()
	mine := ctx.Err() == nil
	if mine {
		c.state.Store(callTaken)
		batch = append(batch, c)
	}
	if len(batch) > 0 {
		b.send(ctx, c, batch)
	}
	reply, err := c.reply, c.err
	if !mine {
		err = context.Cause(ctx)
	}
	b.handOff()
	putScriptCall(c)
	return reply, err
}

// take empties the queue and returns the calls in it still wanted, each
// marked taken; the ones given up are pooled.
func (b *scriptBatcher) take() []*scriptCall {
	b.mu.Lock()
	q := b.queue
	b.queue, b.spare = b.spare[:0], nil
	b.mu.Unlock()
	batch := q[:0]
	for _, c := range q {
		if c.state.CompareAndSwap(callQueued, callTaken) {
			batch = append(batch, c)
		} else {
			putScriptCall(c) // given up: never sent
		}
	}
	clear(q[len(batch):])
	return batch
}

// handOff ends a pipeline: when calls are queued, the first still waiting
// is woken to send them (the pipeline slot passes to it); otherwise the
// slot is freed.
func (b *scriptBatcher) handOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queue) > 0 {
		next := b.queue[0]
		b.queue = b.queue[1:]
		if next.state.CompareAndSwap(callQueued, callLeading) {
			next.ready <- struct{}{}
			return
		}
		putScriptCall(next) // given up: never sent
	}
	b.inFlight--
}

// drain is the guard's goroutine: it sends batch, then the queue, until the
// queue is empty.
func (b *scriptBatcher) drain(batch []*scriptCall) {
	for {
		if len(batch) > 0 {
			b.send(context.Background(), nil, batch)
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		batch = b.take()
	}
}

// send runs the calls of batch (or c alone, when batch is nil) and delivers
// their replies to their callers, except c's: c's caller is the one
// sending. Calls answered NOSCRIPT (Redis lost its script cache) go again
// as EVAL.
func (b *scriptBatcher) send(ctx context.Context, c *scriptCall, batch []*scriptCall) {
	if batch == nil {
		b.run(ctx, c)
		if c.noScript() {
			b.run(ctx, c)
		}
		return
	}
	b.pipe(ctx, c, batch)
	retry := 0
	for _, x := range batch {
		if x.noScript() {
			batch[retry] = x
			retry++
		}
	}
	if retry > 0 {
		b.pipe(ctx, c, batch[:retry])
	}
	for _, x := range batch {
		if x != c {
			b.deliver(x)
		}
	}
}

// run sends one call.
func (b *scriptBatcher) run(ctx context.Context, c *scriptCall) {
	v, err := b.rdb.Do(ctx, c.args...).Result()
	c.setResult(v, err)
}

// pipe sends the calls of batch in one pipeline; self, when not nil, is the
// sender's own call, and ctx the sender's context. Unless self is all
// there is to send, the context carries no caller's cancellation (each
// caller waits on its own), only the latest of their deadlines: the
// pipeline outlives no caller that could still use its reply.
func (b *scriptBatcher) pipe(ctx context.Context, self *scriptCall, batch []*scriptCall) {
	if len(batch) == 1 && batch[0] == self {
		b.run(ctx, self)
		return
	}
	pctx, cancel := batchContext(ctx, batch)
	defer cancel()
	if len(batch) == 1 {
		b.run(pctx, batch[0])
		return
	}
	p := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, x := range batch {
		cmds[i] = p.Do(pctx, x.args...)
	}
	_, _ = p.Exec(pctx) // each command carries its own error
	for i, x := range batch {
		v, err := cmds[i].Result()
		x.setResult(v, err)
	}
}

// batchContext returns the context of a pipeline sending batch: ctx's
// values without its cancellation, and the latest of the calls' deadlines
// if every call has one.
func batchContext(ctx context.Context, batch []*scriptCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, x := range batch {
		if x.deadline.IsZero() {
			return context.WithoutCancel(ctx), func() {}
		}
		if x.deadline.After(latest) {
			latest = x.deadline
		}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), latest)
}

// deliver tells c's caller its reply, or hands it to late when the caller
// left after c was sent.
func (b *scriptBatcher) deliver(c *scriptCall) {
	if c.state.CompareAndSwap(callTaken, callDone) {
		c.ready <- struct{}{}
		return
	}
	if b.late != nil {
		b.late(c, c.reply, c.err)
	}
	putScriptCall(c)
}

// scriptCall is one reserve.lua call: its argument list, pooled so that the
// hot path allocates none of it (args points into keys and nums), and its
// place in the batcher.
type scriptCall struct {
	args []any
	keys []string
	nums []int64

	// bs and beat are the call's buckets and whether it carries the
	// heartbeat, for a late reply (redisStore.late).
	bs   []bucket
	beat bool
	// deadline is the caller's context deadline, or zero.
	deadline time.Time

	state atomic.Int32
	ready chan struct{} // cap 1: the reply is in, or the call is to lead
	reply string
	err   error
}

// setResult records a reply from go-redis: a string, or an error.
func (c *scriptCall) setResult(v any, err error) {
	c.reply, c.err = "", err
	if err != nil {
		return
	}
	s, ok := v.(string)
	if !ok {
		c.err = fmt.Errorf("%w: reserve returned %T", errRedisReply, v)
		return
	}
	c.reply = s
}

// noScript reports whether Redis answered NOSCRIPT, and if so turns the call
// into an EVAL of the source for its next try.
func (c *scriptCall) noScript() bool {
	if c.err == nil || !redis.HasErrorPrefix(c.err, "NOSCRIPT") || c.args[0] != "evalsha" {
		return false
	}
	c.args[0], c.args[1] = "eval", reserveSrcArg
	return true
}

var scriptCalls = sync.Pool{New: func() any { return &scriptCall{ready: make(chan struct{}, 1)} }}

// maxPooledBuckets bounds the calls kept in the pool, so that one request
// with many buckets does not pin large slices.
const maxPooledBuckets = 16

// getScriptCall returns an empty call with room for n keys and m numbers.
func getScriptCall(n, m int) *scriptCall {
	c, _ := scriptCalls.Get().(*scriptCall)
	if c == nil {
		c = &scriptCall{ready: make(chan struct{}, 1)}
	}
	if cap(c.keys) < n {
		c.keys = make([]string, n)
	}
	if cap(c.nums) < m {
		c.nums = make([]int64, m)
	}
	if cap(c.args) < 3+n+m {
		c.args = make([]any, 0, 3+n+m)
	}
	c.keys, c.nums = c.keys[:n], c.nums[:m]
	return c
}

// putScriptCall clears c, so the pool holds no key, argument or reply, and
// pools it.
func putScriptCall(c *scriptCall) {
	if len(c.keys) > maxPooledBuckets {
		return
	}
	clear(c.args[:cap(c.args)])
	clear(c.keys)
	c.args = c.args[:0]
	c.bs, c.beat, c.deadline = nil, false, time.Time{}
	c.reply, c.err = "", nil
	scriptCalls.Put(c)
}
