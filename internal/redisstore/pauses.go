package redisstore

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

// A pause reaches the other replicas two ways. The store keeps it in the
// buckets (pause.lua), so that every replica that books one of them before
// it ends learns of it with its reservation; and Pause publishes it on the
// namespace's pause channel, so that a replica whose waiters all sleep on
// slots booked before it (and so book nothing until one wakes, into the
// server's rejection) learns of it at once. The channel is the fast way,
// the buckets the sure one: a message lost while a subscriber reconnects
// costs what it cost before the channel, one request per such replica.
//
// The same channel carries the stretches of a cut (store.Stretch): Limit
// publishes what it did to a bucket's booked slots, so that every replica
// re-times its waiters on them, which would otherwise leave on the times
// they booked at the rule's rate. Only the channel tells of a stretch: a
// replica that misses one lets its waiters leave on their old slots, as
// every replica did before stretches were told.
//
// A message is JSON: {"d": µs, "k": [bucket keys]} for a pause, the
// pause's length from its publication; {"f": µs, "r": ratio, "k": [keys],
// "o": origin} for a stretch, where it starts from its publication, its
// ratio and the publishing store's id (whose own Transport re-timed its
// waiters from Limit's answer already). Times are relative, so that no
// clock but the receiver's matters; they err late by the message's
// latency, well under the lateness a slot is allowed. The keys are the
// Transport's keys of the buckets, which are safe to publish: they are
// the Redis keys' own ends, secrets hashed. PUBLISH on a Cluster reaches
// every node, so the subscriber may be on any.

// fleetMessage is what Pause and Limit publish.
type fleetMessage struct {
	D      int64    `json:"d,omitempty"`
	F      int64    `json:"f,omitempty"`
	R      float64  `json:"r,omitempty"`
	Origin string   `json:"o,omitempty"`
	Keys   []string `json:"k"`
}

// pauseChannel is the namespace's pause channel.
func (s *Store) pauseChannel() string { return s.prefix + "pauses" }

// publishPause tells the namespace's replicas that bs are paused for d.
func (s *Store) publishPause(ctx context.Context, bs []store.Bucket, d time.Duration) {
	m := fleetMessage{D: d.Microseconds(), Keys: make([]string, len(bs))}
	for i := range bs {
		m.Keys[i] = bs[i].Key
	}
	s.publish(ctx, m)
}

// publishStretch tells the namespace's other replicas that b's booked
// slots were stretched as st says.
func (s *Store) publishStretch(ctx context.Context, b store.Bucket, st store.Stretch) {
	s.publish(ctx, fleetMessage{F: st.From.Microseconds(), R: st.Ratio, Origin: s.id, Keys: []string{b.Key}})
}

// publish sends m on the pause channel, on a goroutine of its own: the
// message is news, not state (the buckets hold the pause and the
// stretched slots), so a slow or failed PUBLISH must neither delay the
// caller nor count against Redis in the outage store's bound of its call.
func (s *Store) publish(ctx context.Context, m fleetMessage) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, publishTimeout)
		defer cancel()
		_ = s.rdb.Publish(cctx, s.pauseChannel(), b).Err()
	}()
}

// publishTimeout bounds a pause's PUBLISH: a message that comes later than
// this is worth little beside what the buckets tell.
const publishTimeout = time.Second

// Listener is what Watch calls with what the namespace's replicas
// publish. Either may be nil.
type Listener struct {
	// Pause is called with the bucket keys and the length of every pause
	// a replica publishes (this one's included).
	Pause func(keys []string, d time.Duration)
	// Stretch is called with the bucket keys, the start (from the
	// message's arrival) and the ratio of every stretch another replica's
	// Limit made (store.Stretch); this store's own are left out, as its
	// caller re-times its waiters from Limit's answer.
	Stretch func(keys []string, from time.Duration, ratio float64)
}

// Watch calls l with every message on the namespace's pause channel, on
// one goroutine, in the order they come, until stop is called; stop waits
// for the last call to return. The subscription is made on a goroutine of
// its own, so that a Redis that is down delays no caller; go-redis
// resubscribes after a reconnect. A message that does not parse, names no
// key, or names neither a pause's length nor a stretch's ratio (above 0,
// not 1),
// is ignored. A stretch's ratio is not capped: the store stretched the
// bucket's own slots by as much, and a waiter stretched beyond its
// request's budget fails at once (the Transport's queue).
func (s *Store) Watch(l Listener) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu sync.Mutex
		ps *redis.PubSub
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sub := s.rdb.Subscribe(ctx, s.pauseChannel())
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			_ = sub.Close()
			return
		}
		ps = sub
		mu.Unlock()
		for msg := range sub.Channel() {
			s.heard(l, msg.Payload)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			cancel()
			if ps != nil {
				// Closing ends the message channel, and so the loop.
				_ = ps.Close()
			}
			mu.Unlock()
			<-done
		})
	}
}

// heard hands one message to l.
func (s *Store) heard(l Listener, payload string) {
	var m fleetMessage
	if json.Unmarshal([]byte(payload), &m) != nil || len(m.Keys) == 0 {
		return
	}
	switch {
	case m.D > 0:
		if l.Pause != nil {
			l.Pause(m.Keys, time.Duration(min(m.D, MaxSpanMicros))*time.Microsecond)
		}
	case m.R > 0 && m.R != 1 && m.Origin != s.id:
		if l.Stretch != nil {
			l.Stretch(m.Keys, time.Duration(min(max(m.F, 0), MaxSpanMicros))*time.Microsecond, m.R)
		}
	}
}
