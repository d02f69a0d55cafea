package lease

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// netSlack is added to a safety-net time from Redis, so that the round it
// schedules runs once the expiry has passed on Redis's clock.
const netSlack = 5 * time.Millisecond

// keeper is a Redis store's renewal loop. Every TTL/3 it renews all the
// store's held leases and waiting tickets in one renew.lua call per 256
// caps (the keys of a namespace share one slot), marks lost the leases
// Redis no longer knows or that went unrenewed for a TTL, and wakes the
// waiters renew.lua says may acquire. It also runs a round at the safety
// net a waiting reply names (the earliest expiry of a holder or ticket, or
// a climb of the cap), so that the slot of a crashed holder reaches a local
// waiter even though no release publishes it. The loop runs only while the
// store holds a lease or a ticket; it is safe for concurrent use.
type keeper struct {
	s *Redis

	mu      sync.Mutex
	leases  map[*redisPart]struct{}
	waiters map[*redisWaiter]struct{}
	net     time.Time     // the earliest safety net asked for, zero if none
	kick    chan struct{} // buffered 1: a nearer net
	running bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newKeeper(s *Redis) *keeper {
	return &keeper{
		s:       s,
		leases:  map[*redisPart]struct{}{},
		waiters: map[*redisWaiter]struct{}{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
}

// addLease starts renewing p.
func (k *keeper) addLease(p *redisPart) { k.addLeaseAt(p, time.Now()) }

// addLeaseAt starts renewing p, counted as renewed at.
func (k *keeper) addLeaseAt(p *redisPart, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p.renewed = at
	k.leases[p] = struct{}{}
	k.startLocked()
}

// dropLease stops renewing p.
func (k *keeper) dropLease(p *redisPart) {
	k.mu.Lock()
	delete(k.leases, p)
	k.mu.Unlock()
}

// addTicket starts renewing w's ticket.
func (k *keeper) addTicket(w *redisWaiter) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiters[w] = struct{}{}
	k.startLocked()
}

// dropTicket stops renewing w's ticket.
func (k *keeper) dropTicket(w *redisWaiter) {
	k.mu.Lock()
	delete(k.waiters, w)
	k.mu.Unlock()
}

// netIn asks for a round d from now (plus slack) if that is sooner than the
// next one planned.
func (k *keeper) netIn(d time.Duration) {
	at := time.Now().Add(d + netSlack)
	k.mu.Lock()
	sooner := k.net.IsZero() || at.Before(k.net)
	if sooner {
		k.net = at
	}
	k.mu.Unlock()
	if sooner {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
}

// held returns the Redis leases still held, for the Fallback.
func (k *keeper) held() []*redisPart {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*redisPart, 0, len(k.leases))
	for p := range k.leases {
		out = append(out, p)
	}
	return out
}

// startLocked starts the loop if it is not running. Called under mu.
func (k *keeper) startLocked() {
	if k.running || k.closed {
		return
	}
	k.running = true
	k.wg.Add(1)
	go k.loop()
}

// close stops the loop and waits for it.
func (k *keeper) close() {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.stop)
	}
	k.mu.Unlock()
	k.wg.Wait()
}

// loop runs rounds until nothing is left to renew.
func (k *keeper) loop() {
	defer k.wg.Done()
	every := k.s.ttl / 3
	last := time.Now()
	timer := time.NewTimer(k.s.ticketTTL / 3)
	defer timer.Stop()
	for {
		k.mu.Lock()
		if len(k.leases) == 0 && len(k.waiters) == 0 {
			k.running = false
			k.net = time.Time{}
			k.mu.Unlock()
			k.s.hub.unsubscribeIdle()
			return
		}
		next := last.Add(every)
		if len(k.waiters) > 0 {
			next = last.Add(k.s.ticketTTL / 3) // tickets live shorter
		}
		if !k.net.IsZero() && k.net.Before(next) {
			next = k.net
		}
		k.mu.Unlock()
		timer.Reset(time.Until(next))
		select {
		case <-k.stop:
			return
		case <-k.kick:
			timer.Stop() // since Go 1.23 no stale tick follows a Stop
			continue
		case <-timer.C:
		}
		k.mu.Lock()
		k.net = time.Time{}
		k.mu.Unlock()
		last = time.Now()
		k.round()
		// Channels nobody waited on since the last round: a busy store
		// would otherwise stay subscribed to every key it ever waited on.
		k.s.hub.unsubscribeIdle()
	}
}

// renewGroup is what one round renews under one cap key.
type renewGroup struct {
	c       Cap
	tokens  []string
	parts   []*redisPart
	tickets []*redisWaiter
}

// round renews everything once.
func (k *keeper) round() {
	sent := time.Now()
	k.mu.Lock()
	groups := map[string]*renewGroup{}
	var order []*renewGroup
	group := func(c Cap) *renewGroup {
		g := groups[c.Key]
		if g == nil {
			g = &renewGroup{c: c}
			groups[c.Key] = g
			order = append(order, g)
		}
		return g
	}
	for p := range k.leases {
		for i, c := range p.caps {
			g := group(c)
			g.tokens = append(g.tokens, strconv.FormatInt(p.tokens[i], 10))
			g.parts = append(g.parts, p)
		}
	}
	waiting := map[*redisWaiter]int{} // caps in which the ticket may acquire
	for w := range k.waiters {
		waiting[w] = 0
		for _, c := range w.caps {
			g := group(c)
			g.tickets = append(g.tickets, w)
		}
	}
	k.mu.Unlock()

	lost := map[*redisPart]bool{}
	wake := map[*redisWaiter]bool{}
	var net time.Duration
	failed := false
	for start := 0; start < len(order); start += maxCapsPerRenewal {
		chunk := order[start:min(start+maxCapsPerRenewal, len(order))]
		r, err := k.s.renewCall(chunk)
		if err != nil {
			failed = true
			continue
		}
		if net == 0 || r.net < net {
			net = r.net
		}
		for i, g := range chunk {
			for _, tok := range r.caps[i].lostTokens {
				for j, t := range g.tokens {
					if t == tok {
						lost[g.parts[j]] = true
					}
				}
			}
			byID := map[string]*redisWaiter{}
			for _, w := range g.tickets {
				byID[w.tid] = w
			}
			for _, id := range r.caps[i].lostTickets {
				if w := byID[id]; w != nil {
					wake[w] = true
				}
			}
			for _, id := range r.caps[i].eligible {
				if w := byID[id]; w != nil {
					waiting[w]++
				}
			}
		}
	}
	for w, n := range waiting {
		if n == len(w.caps) {
			wake[w] = true
		}
	}

	k.mu.Lock()
	var gone []*redisPart
	for p := range k.leases {
		switch {
		case lost[p]:
			gone = append(gone, p)
		case !failed:
			p.renewed = sent
		case time.Since(p.renewed) >= k.s.ttl:
			gone = append(gone, p)
		}
	}
	for _, p := range gone {
		delete(k.leases, p)
	}
	if len(k.waiters) > 0 && net > 0 {
		at := time.Now().Add(net + netSlack)
		if k.net.IsZero() || at.Before(k.net) {
			k.net = at
		}
	}
	k.mu.Unlock()
	for _, p := range gone {
		p.lease.markLost()
	}
	for w := range wake {
		w.signal()
	}
	if failed {
		// Each waiter learns of the failure from its own call.
		k.s.hub.wakeAll()
		return
	}
	k.s.flushOrphans(context.Background())
}

// renewReply is renew.lua's reply.
type renewReply struct {
	net  time.Duration
	caps []renewCap
}

// renewCap is renew.lua's reply for one cap.
type renewCap struct {
	lostTokens, lostTickets, eligible []string
}

// renewCall runs renew.lua for groups.
func (s *Redis) renewCall(groups []*renewGroup) (renewReply, error) {
	keys := make([]string, 0, 4*len(groups))
	args := []any{s.nowArg(), s.ttl.Milliseconds(), s.climb.Milliseconds(), s.keep(), s.ticketTTL.Milliseconds()}
	for _, g := range groups {
		k := s.keys(g.c.Key)
		keys = append(keys, k[:]...)
		args = append(args, g.c.Limit, s.channel(g.c.Key), len(g.tokens))
		for _, t := range g.tokens {
			args = append(args, t)
		}
		args = append(args, len(g.tickets))
		for _, w := range g.tickets {
			args = append(args, w.tid)
		}
	}
	v, err := s.run(context.Background(), "renew", renewScript, keys, args, nil)
	if err != nil {
		return renewReply{}, err
	}
	return parseRenew(v, len(groups))
}

// parseRenew checks and decodes renew.lua's reply for n caps.
func parseRenew(v any, n int) (renewReply, error) {
	bad := fmt.Errorf("%w: renew: %v", errReply, v)
	a, ok := v.([]any)
	if !ok || len(a) != 1+n {
		return renewReply{}, bad
	}
	net, ok := a[0].(int64)
	if !ok {
		return renewReply{}, bad
	}
	r := renewReply{net: time.Duration(net) * time.Millisecond, caps: make([]renewCap, n)}
	for i := range n {
		parts, ok := a[1+i].([]any)
		if !ok || len(parts) != 3 {
			return renewReply{}, bad
		}
		var lists [3][]string
		for j, p := range parts {
			items, ok := p.([]any)
			if !ok {
				return renewReply{}, bad
			}
			for _, it := range items {
				s, ok := it.(string)
				if !ok {
					return renewReply{}, bad
				}
				lists[j] = append(lists[j], s)
			}
		}
		r.caps[i] = renewCap{lostTokens: lists[0], lostTickets: lists[1], eligible: lists[2]}
	}
	return r, nil
}
