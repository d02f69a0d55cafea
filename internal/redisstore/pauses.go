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
// A message is JSON, {"d": µs, "k": [bucket keys]}: the pause's length
// from its publication (relative, so that no clock but the receiver's
// matters; it errs late by the message's latency, well under the lateness
// a slot is allowed) and the Transport's keys of the buckets paused, which
// are safe to publish: they are the Redis keys' own ends, secrets hashed.
// PUBLISH on a Cluster reaches every node, so the subscriber may be on any.

// pauseMessage is what Pause publishes.
type pauseMessage struct {
	D    int64    `json:"d"`
	Keys []string `json:"k"`
}

// pauseChannel is the namespace's pause channel.
func (s *Store) pauseChannel() string { return s.prefix + "pauses" }

// publishPause tells the namespace's replicas that bs are paused for d, on
// a goroutine of its own: the message is news, not state (the buckets hold
// the pause), so a slow or failed PUBLISH must neither delay the caller
// nor count against Redis in the outage store's bound of the Pause call.
func (s *Store) publishPause(ctx context.Context, bs []store.Bucket, d time.Duration) {
	m := pauseMessage{D: d.Microseconds(), Keys: make([]string, len(bs))}
	for i := range bs {
		m.Keys[i] = bs[i].Key
	}
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

// WatchPauses calls fn with the bucket keys and the length of every pause
// a replica of the namespace publishes (this one's included), on one
// goroutine, in the order they come, until stop is called; stop waits for
// fn's last call to return. The subscription is made on a goroutine of its
// own, so that a Redis that is down delays no caller; go-redis
// resubscribes after a reconnect. A message that does not parse, or names
// no key or no length, is ignored.
func (s *Store) WatchPauses(fn func(keys []string, d time.Duration)) (stop func()) {
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
			var m pauseMessage
			if json.Unmarshal([]byte(msg.Payload), &m) != nil || m.D <= 0 || len(m.Keys) == 0 {
				continue
			}
			fn(m.Keys, time.Duration(min(m.D, MaxSpanMicros))*time.Microsecond)
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
