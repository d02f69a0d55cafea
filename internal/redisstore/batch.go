package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

// scriptBatcher sends the reserve calls of concurrent requests to Redis
// together: calls that arrive while earlier ones are on the wire queue up
// and leave together, those sharing a hash tag as one reserve_batch.lua
// call (one script dispatch and one TIME for them all: Redis's time per
// request is what limits a busy fleet), those of different tags as one
// pipeline of such calls. Each request is still booked all or nothing on
// its own, in arrival order. A lone caller sends its call (reserve_call.lua)
// at once on its own goroutine, so one request at a time costs exactly one
// round trip and no goroutine switch.
//
// The queue is sent by one of its callers, the leader: the caller that
// found fewer than maxInFlight calls on the wire, or, when one comes back
// with callers queued behind it, the first of them, woken to take the
// queue as it then stands (the longer it waited, the deeper the batch).
// With guard set (a client that ignores context deadlines, see
// honoursDeadlines) calls are sent by sender goroutines instead (one per
// pipeline in flight, kept while calls keep coming, see sender), which send
// the queue again each time one comes back, so that every caller waits no
// longer than its context or its timeout (a timer kept in its pooled
// scriptCall) allows.
//
// A caller whose context ends while its call is queued leaves, and the call
// is never sent; once sent, the caller may still leave, and a booking that
// arrives after it is refunded (see Store.abandoned). Either way the call's
// memory then belongs to the batcher, which pools it when done with it.
type scriptBatcher struct {
	rdb   redis.UniversalClient
	guard bool
	// abandoned receives each call whose caller left after it was sent, with its
	// reply; it must not keep c.
	abandoned func(c *scriptCall, reply string, err error)
	// work hands a call to a sender goroutine that is idle (guard mode):
	// unbuffered, so a call is taken only by a sender waiting for one.
	work chan *scriptCall

	mu       sync.Mutex
	queue    []*scriptCall
	inFlight int
}

// maxInFlight bounds the calls (or pipelines) on the wire at once. Two keep
// Redis busy while the client reads one reply and writes the next batch;
// more measured no faster (BenchmarkRedis, 64 goroutines) and split the
// queue into shallower batches.
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

// errCallTimeout is do's error for a call its timeout ended: the store
// marks it as store.ErrTimeout.
var errCallTimeout = errors.New("throttle: redis call timed out")

// do sends c's arguments (one EVALSHA) and returns the reply, a string or an
// error, and how long the call waited in the queue before it went to Redis
// (0 when it went at once): Redis decided no earlier than that after do
// was called. c belongs to the batcher from then on: the caller must not
// touch it after do returns.
//
// timeout, when positive, bounds the wait on top of ctx, without a context
// of its own (guard mode only: a client that honours deadlines needs them
// in ctx): the call then ends with errCallTimeout.
func (b *scriptBatcher) do(ctx context.Context, c *scriptCall, timeout time.Duration) (string, time.Duration, error) {
	b.mu.Lock()
	if b.inFlight < maxInFlight {
		b.inFlight++
		b.mu.Unlock()
		c.state.Store(callTaken) // read by wait and deliver, in guard mode
		if b.guard {
			timer := c.arm(timeout) // before a sender can deliver c
			select {
			case b.work <- c: // an idle sender takes it
			default:
				go b.sender(c)
			}
			return b.wait(ctx, c, timer)
		}
		b.send(ctx, c, nil)
		reply, err := c.reply, c.err
		b.handOff()
		putScriptCall(c)
		return reply, 0, err
	}
	c.state.Store(callQueued)
	c.enqueued = time.Now()
	b.queue = append(b.queue, c)
	timer := c.arm(timeout)
	b.mu.Unlock()
	return b.wait(ctx, c, timer)
}

// wait waits for c's reply, or for its turn to lead, or for ctx to end, or
// for timer (c's, armed, or nil) to fire.
func (b *scriptBatcher) wait(ctx context.Context, c *scriptCall, timer <-chan time.Time) (string, time.Duration, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		if c.giveUp() {
			return "", 0, context.Cause(ctx)
		}
		// Its reply or its turn to lead came in just now.
		<-c.ready
	case <-timer:
		if c.giveUp() {
			return "", 0, errCallTimeout
		}
		<-c.ready
	}
	if timer != nil {
		c.timer.Stop()
	}
	if c.state.Load() == callLeading {
		return b.lead(ctx, c)
	}
	reply, queued, err := c.reply, c.queued, c.err
	putScriptCall(c)
	return reply, queued, err
}

// giveUp marks c as left by its caller, and reports whether it was in
// time: false when its reply or its turn to lead came first.
func (c *scriptCall) giveUp() bool {
	return c.state.CompareAndSwap(callQueued, callGaveUp) ||
		c.state.CompareAndSwap(callTaken, callAbandoned)
}

// arm starts c's timer for timeout and returns its channel, or nil when
// timeout is not positive. The timer lives as long as c, in the pool: one
// allocation for the life of a pooled call, not one a call.
func (c *scriptCall) arm(timeout time.Duration) <-chan time.Time {
	if timeout <= 0 {
		return nil
	}
	if c.timer == nil {
		c.timer = time.NewTimer(timeout)
	} else {
		c.timer.Reset(timeout) // Go ≥ 1.23: no stale tick survives Reset
	}
	return c.timer.C
}

// lead sends the queue, c's call included unless c's caller has already
// given up, then passes the lead on.
func (b *scriptBatcher) lead(ctx context.Context, c *scriptCall) (string, time.Duration, error) {
	batch := b.take()
	mine := ctx.Err() == nil
	if mine {
		c.state.Store(callTaken)
		c.queued = time.Since(c.enqueued)
		batch = append(batch, c)
	}
	if len(batch) > 0 {
		b.send(ctx, c, batch)
	}
	reply, queued, err := c.reply, c.queued, c.err
	if !mine {
		err = context.Cause(ctx)
	}
	b.handOff()
	putScriptCall(c)
	return reply, queued, err
}

// take empties the queue and returns the calls in it still wanted, each
// marked taken; the ones given up are pooled.
func (b *scriptBatcher) take() []*scriptCall {
	b.mu.Lock()
	q := b.queue
	b.queue = nil // q's array becomes the batch's
	b.mu.Unlock()
	batch := q[:0]
	var now time.Time
	for _, c := range q {
		if c.state.CompareAndSwap(callQueued, callTaken) {
			if now.IsZero() {
				now = time.Now() // one clock read a batch
			}
			c.queued = now.Sub(c.enqueued)
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

// senderIdle is how long a sender goroutine waits for work before it
// ends: it ends between one and two of these after its last call, so
// that a batcher that is not used leaves no goroutine behind (goleak
// checks every package's tests), and one in use starts none per call.
const senderIdle = 50 * time.Millisecond

// sender is a guard goroutine: it drains from first, then takes the next
// call handed to an idle sender (b.work), until it finds none for a
// senderIdle after having served none in the one before. A caller that
// finds no idle sender starts one; the pipelines in flight (inFlight)
// bound the senders busy at once. Reusing it spares a goroutine start
// per lone call.
func (b *scriptBatcher) sender(first *scriptCall) {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for c, served := first, true; ; {
		if c != nil {
			b.drain(c)
			c, served = nil, true
		}
		select {
		case c = <-b.work:
		case <-idle.C:
			if !served {
				return
			}
			served = false
			idle.Reset(senderIdle)
		}
	}
}

// drain sends first, then the queue, until the queue is empty; it frees
// first's pipeline slot when done.
func (b *scriptBatcher) drain(first *scriptCall) {
	// first goes as send would send a batch of it alone (pipe runs one
	// call as itself), without the slice that escaped on every lone call.
	b.run(context.Background(), first)
	b.deliver(first)
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if batch := b.take(); len(batch) > 0 {
			b.send(context.Background(), nil, batch)
		}
	}
}

// send runs the calls of batch (or c alone, when batch is nil) and delivers
// their replies to their callers, except c's: c's caller is the one
// sending.
func (b *scriptBatcher) send(ctx context.Context, c *scriptCall, batch []*scriptCall) {
	if batch == nil {
		b.run(ctx, c)
		return
	}
	b.pipe(ctx, c, batch)
	for _, x := range batch {
		if x != c {
			b.deliver(x)
		}
	}
}

// run sends one call alone (reserve_call.lua).
func (b *scriptBatcher) run(ctx context.Context, c *scriptCall) {
	c.setResult(b.evalsha(ctx, c.args, reserveSrcArg))
}

// evalsha sends args, an EVALSHA, and again as an EVAL of src if Redis
// answers NOSCRIPT (it lost its script cache).
func (b *scriptBatcher) evalsha(ctx context.Context, args []any, src any) (any, error) {
	v, err := b.rdb.Do(ctx, args...).Result()
	if isNoScript(err) {
		args[0], args[1] = "eval", src
		v, err = b.rdb.Do(ctx, args...).Result()
	}
	return v, err
}

// pipe sends the calls of batch; self, when not nil, is the sender's own
// call, and ctx the sender's context. Unless self is all there is to send,
// the context carries no caller's cancellation (each caller waits on its
// own), only the latest of their deadlines: the call outlives no caller
// that could still use its reply.
//
// The calls whose keys share a hash tag go as one reserve_batch.lua call
// (one script dispatch, one TIME and one reply for them all: Redis's time
// per request is what limits a busy fleet), and the calls of different
// tags, which may live on different Cluster nodes, as one pipeline of such
// calls.
func (b *scriptBatcher) pipe(ctx context.Context, self *scriptCall, batch []*scriptCall) {
	if len(batch) == 1 && batch[0] == self {
		b.run(ctx, self)
		return
	}
	pctx := ctx
	if !b.guard {
		// With guard, the client ignores deadlines and the callers keep
		// their own: no context (and timer) to build.
		var cancel context.CancelFunc
		pctx, cancel = batchContext(ctx, batch)
		defer cancel()
	}
	if len(batch) == 1 {
		b.run(pctx, batch[0])
		return
	}
	groups := groupByTag(batch)
	if len(groups) == 1 {
		b.runGroup(pctx, groups[0])
		return
	}
	p := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(groups))
	for i, g := range groups {
		cmds[i] = p.Do(pctx, groupArgs(g)...)
	}
	_, _ = p.Exec(pctx) // each command carries its own error
	for i, g := range groups {
		v, err := cmds[i].Result()
		if isNoScript(err) {
			b.runGroup(pctx, g) // rare: again on its own, as EVAL
			continue
		}
		setGroupResult(g, v, err)
	}
}

// runGroup sends the calls of g, which share a hash tag, as one call.
func (b *scriptBatcher) runGroup(ctx context.Context, g []*scriptCall) {
	if len(g) == 1 {
		b.run(ctx, g[0])
		return
	}
	v, err := b.evalsha(ctx, groupArgs(g), reserveBatchSrcArg)
	setGroupResult(g, v, err)
}

// maxBatchRequests bounds the requests one reserve_batch.lua call books. A
// script holds Redis for its whole run, every other client of it waiting:
// a process that meets a burst of thousands of requests sends them as
// several calls of at most this many (about a millisecond of Redis's time
// each), in one pipeline, not as one call of tens of milliseconds.
const maxBatchRequests = 128

// groupByTag splits batch into the groups that can each go as one script
// call: by the calls' hash tags, in order of first appearance, and into
// runs of at most maxBatchRequests. Most batches are one group: batch
// itself.
func groupByTag(batch []*scriptCall) [][]*scriptCall {
	tag := batch[0].tag
	same := true
	for _, c := range batch[1:] {
		if c.tag != tag {
			same = false
			break
		}
	}
	if same && len(batch) <= maxBatchRequests {
		return [][]*scriptCall{batch}
	}
	var groups [][]*scriptCall
	open := make(map[string]int) // tag → index of its group still filling
	for _, c := range batch {
		i, ok := open[c.tag]
		if !ok || len(groups[i]) == maxBatchRequests {
			i = len(groups)
			open[c.tag] = i
			groups = append(groups, make([]*scriptCall, 0, min(len(batch), maxBatchRequests)))
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// groupArgs returns the arguments of one call sending the calls of g:
// their own when g holds one, else an EVALSHA of reserve_batch.lua.
func groupArgs(g []*scriptCall) []any {
	if len(g) == 1 {
		return g[0].args
	}
	nk, na := 0, 0
	for _, c := range g {
		nk += len(c.keys)
		na += 2 + len(c.ownArgs())
	}
	args := make([]any, 0, 3+nk+2+na)
	args = append(args, "evalsha", reserveBatchSHA, nk)
	for _, c := range g {
		args = append(args, c.keyArgs()...)
	}
	// One now serves them all: "" (Redis's TIME) but in tests.
	args = append(args, g[0].nowArg(), len(g))
	for _, c := range g {
		own := c.ownArgs()
		args = append(args, len(c.keys), len(own))
		args = append(args, own...)
	}
	return args
}

// setGroupResult hands each call of g its reply from reserve_batch.lua's
// array (or reserve_call.lua's string, for a group of one), or the error.
func setGroupResult(g []*scriptCall, v any, err error) {
	if len(g) == 1 || err != nil {
		for _, c := range g {
			c.setResult(v, err)
		}
		return
	}
	replies, ok := v.([]any)
	if !ok || len(replies) != len(g) {
		err := fmt.Errorf("%w: reserve_batch returned %T for %d requests", errRedisReply, v, len(g))
		for _, c := range g {
			c.setResult(nil, err)
		}
		return
	}
	for i, c := range g {
		c.setResult(replies[i], nil)
	}
}

// isNoScript reports whether err is Redis's NOSCRIPT: its script cache was
// flushed, or it restarted.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
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

// deliver tells c's caller its reply, or hands it to abandoned when the caller
// left after c was sent.
func (b *scriptBatcher) deliver(c *scriptCall) {
	if c.state.CompareAndSwap(callTaken, callDone) {
		c.ready <- struct{}{}
		return
	}
	if b.abandoned != nil {
		b.abandoned(c, c.reply, c.err)
	}
	putScriptCall(c)
}

// scriptCall is one reserve.lua call: its argument list, pooled so that the
// hot path allocates none of it (args points into keys and nums), and its
// place in the batcher.
//
// Its args are an EVALSHA of reserve_call.lua, laid out here alone: the
// caller fills keys, then calls begin with the now argument and add with
// reserve.lua's own arguments (numbers in nums, by pointer); keyArgs, nowArg
// and ownArgs read the parts back (groupArgs).
type scriptCall struct {
	args []any
	keys []string
	nums []int64

	// tag is the keys' hash tag, which they share: calls of one tag can be
	// booked in one script call (reserve_batch.lua).
	tag string
	// bs and beat are the call's buckets and whether it carries the
	// heartbeat, for a late reply (Store.abandoned).
	bs   []store.Bucket
	beat bool
	// deadline is the caller's context deadline, or zero.
	deadline time.Time

	state atomic.Int32
	ready chan struct{} // cap 1: the reply is in, or the call is to lead
	// timer bounds its caller's wait (do's timeout), made once and Reset
	// for every call; only the caller reads it.
	timer *time.Timer
	// enqueued is when the call joined the queue, queued how long it
	// waited there before it was taken to go to Redis (do's queued).
	enqueued time.Time
	queued   time.Duration
	reply    string
	err      error
}

// begin starts c's args: the EVALSHA, its keys (c.keys, by pointer), and
// now ("" for Redis's TIME, or a *int64 in µs).
func (c *scriptCall) begin(now any) {
	c.args = append(c.args[:0], "evalsha", reserveSHA, len(c.keys))
	for i := range c.keys {
		c.args = append(c.args, &c.keys[i])
	}
	c.args = append(c.args, now)
}

// add appends arguments after now: reserve.lua's, as its header lists them.
func (c *scriptCall) add(a ...any) { c.args = append(c.args, a...) }

// keyArgs, nowArg and ownArgs are the parts of c's args that begin and add
// laid out: the keys, now, and the request's own arguments.
func (c *scriptCall) keyArgs() []any { return c.args[3 : 3+len(c.keys)] }
func (c *scriptCall) nowArg() any    { return c.args[3+len(c.keys)] }
func (c *scriptCall) ownArgs() []any { return c.args[4+len(c.keys):] }

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
	c.tag = ""
	c.bs, c.beat, c.deadline = nil, false, time.Time{}
	c.reply, c.err = "", nil
	c.enqueued, c.queued = time.Time{}, 0
	scriptCalls.Put(c)
}
