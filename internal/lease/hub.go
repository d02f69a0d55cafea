package lease

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// hub is a Redis store's one pub/sub connection. It subscribes to the
// channel of every cap key a local request waits on, counting references,
// and hands each message's ticket ids to the waiters that own them. go-redis
// resubscribes after a reconnect; the confirmation that follows wakes
// every waiter of the channel, since a message may have been lost while
// the connection was down.
//
// Scripts publish with PUBLISH, which a Redis Cluster forwards to every
// node, so the connection may be on any node (go-redis puts it on the
// master of the first channel's slot). SPUBLISH would keep the traffic on
// one shard but needs a connection per shard, and one request's channels
// share its namespace's slot while the store's channels in general do not.
//
// Lock order: subMu before mu. mu is never held over a network call.
type hub struct {
	s *Redis

	// subMu serialises SUBSCRIBE and UNSUBSCRIBE, so that an unsubscribe
	// of an idle channel never overtakes its new subscription.
	subMu sync.Mutex
	ps    *redis.PubSub // nil until the first subscription
	done  chan struct{} // closed when the reader has returned

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by close
	chans   map[string]*hubChan
	tickets map[string]*redisWaiter
}

// hubChan is one subscribed (or about to be) channel.
type hubChan struct {
	refs    int
	waiters map[*redisWaiter]struct{}
	sent    bool          // SUBSCRIBE was sent
	ready   chan struct{} // closed at the first confirmation
	isReady bool
}

func newHub(s *Redis) *hub {
	return &hub{s: s, closing: make(chan struct{}), chans: map[string]*hubChan{}, tickets: map[string]*redisWaiter{}}
}

// add registers w's ticket and references its channels.
func (h *hub) add(w *redisWaiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tickets[w.tid] = w
	for _, name := range w.channels {
		c := h.chans[name]
		if c == nil {
			c = &hubChan{waiters: map[*redisWaiter]struct{}{}, ready: make(chan struct{})}
			h.chans[name] = c
		}
		c.refs++
		c.waiters[w] = struct{}{}
	}
}

// remove forgets w. Channels without references stay subscribed until the
// keeper's idle sweep (unsubscribeIdle).
func (h *hub) remove(w *redisWaiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.tickets, w.tid)
	for _, name := range w.channels {
		if c := h.chans[name]; c != nil {
			c.refs--
			delete(c.waiters, w)
		}
	}
}

// subscribe makes sure w's channels are subscribed and confirmed, waiting
// up to the call timeout, and reports whether any was not confirmed before
// (a message sent before then was not received).
func (h *hub) subscribe(ctx context.Context, w *redisWaiter) (fresh bool) {
	var wait []chan struct{}
	var send []string
	h.mu.Lock()
	for _, name := range w.channels {
		c := h.chans[name]
		if !c.isReady {
			fresh = true
			wait = append(wait, c.ready)
		}
		if !c.sent {
			send = append(send, name)
		}
	}
	h.mu.Unlock()
	if len(send) > 0 {
		h.send(ctx, send)
	}
	if len(wait) == 0 {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, h.s.callTimeout)
	defer cancel()
	for _, r := range wait {
		select {
		case <-r:
		case <-cctx.Done():
			return fresh
		case <-h.closing:
			return fresh
		}
	}
	return fresh
}

// send subscribes to the channels not yet sent, starting the connection and
// its reader on first use.
func (h *hub) send(ctx context.Context, names []string) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	var todo []string
	for _, name := range names {
		if c := h.chans[name]; c != nil && !c.sent {
			c.sent = true
			todo = append(todo, name)
		}
	}
	start := h.ps == nil && len(todo) > 0
	if start {
		h.ps = h.s.rdb.Subscribe(context.WithoutCancel(ctx))
		h.done = make(chan struct{})
	}
	ps := h.ps
	h.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	if start {
		go h.read(ps.ChannelWithSubscriptions(), h.done)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.s.callTimeout)
	defer cancel()
	if err := ps.Subscribe(cctx, todo...); err != nil {
		// go-redis remembers the channels and subscribes on its next
		// (re)connect; the renewal rounds wake the waiters meanwhile.
		_ = h.s.failed("subscribe", err)
	}
}

// read hands messages to waiters until the connection is closed.
func (h *hub) read(ch <-chan any, done chan struct{}) {
	defer close(done)
	for m := range ch {
		switch m := m.(type) {
		case *redis.Message:
			h.deliver(strings.Fields(m.Payload))
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.confirmed(m.Channel)
			}
		}
	}
}

// deliver wakes the waiters of ids, each a ticket id that may now acquire
// or "id:token", a ticket granted the lease of token (see lease.lua).
func (h *hub) deliver(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		id, tok, granted := strings.Cut(id, ":")
		w := h.tickets[id]
		if w == nil {
			continue
		}
		if !granted {
			w.signal()
			continue
		}
		t, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			w.signal() // a malformed grant: its acquire call picks it up
			continue
		}
		w.offer(t)
	}
}

// confirmed marks a channel subscribed and wakes its waiters: after a
// reconnect, messages may have been lost.
func (h *hub) confirmed(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[name]
	if c == nil {
		return
	}
	if !c.isReady {
		c.isReady = true
		close(c.ready)
	}
	for w := range c.waiters {
		w.signal()
	}
}

// wakeAll wakes every waiter: a Redis call failed, and each should learn
// it from its own call.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.tickets {
		w.signal()
	}
}

// unsubscribeIdle unsubscribes from the channels nobody waits on.
func (h *hub) unsubscribeIdle() {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	var idle []string
	for name, c := range h.chans {
		if c.refs == 0 {
			delete(h.chans, name)
			if c.sent {
				idle = append(idle, name)
			}
		}
	}
	ps := h.ps
	h.mu.Unlock()
	if len(idle) == 0 || ps == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.s.callTimeout)
	defer cancel()
	_ = ps.Unsubscribe(ctx, idle...) // a failed unsubscribe costs only stray messages
}

// close closes the connection and waits for the reader.
func (h *hub) close() {
	h.subMu.Lock()
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	ps, done := h.ps, h.done
	h.ps = nil
	h.mu.Unlock()
	h.subMu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
}
