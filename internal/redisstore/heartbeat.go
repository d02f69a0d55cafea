package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/store"
)

// Heartbeat defaults. A replica beats at most once per interval, and only
// while it makes requests: an idle replica drops out of the count after the
// TTL, which is what its peers want, since it spends none of the quota.
const (
	// HeartbeatEvery is the longest interval between a busy replica's beats.
	HeartbeatEvery = time.Second
	// HeartbeatTTL is three intervals, so that one slow or lost beat does
	// not make a busy replica vanish from its peers' count.
	HeartbeatTTL = 3 * HeartbeatEvery
)

var (
	// heartbeatLua defines beat, which reserve.lua calls when a beat is
	// due (see the var block of store.go).
	//go:embed heartbeat.lua
	heartbeatLua string

	//go:embed heartbeat_call.lua
	heartbeatCallLua string
	heartbeatScript  = redis.NewScript(bucketLua + heartbeatLua + heartbeatCallLua)
)

// heartbeat registers this replica in its namespace's replica set and
// remembers how many replicas were alive at the last beat. It is safe for
// concurrent use: due hands each beat to exactly one caller.
type heartbeat struct {
	clock Clock
	key   string // "throttle:{ns}:replicas"
	id    string // random, 64 bits, hex
	every time.Duration
	ttl   time.Duration

	next  atomic.Int64 // Unix ns (local clock) from which the next beat is due
	live  atomic.Int64 // replicas alive at the last beat; 0 before the first
	beats atomic.Int64 // counts recorded so far
}

// newHeartbeat returns the heartbeat of a new replica under prefix
// ("throttle:{ns}:"), whose beats fall due by clock c.
func newHeartbeat(prefix string, c Clock) *heartbeat {
	var b [8]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b[:])
	return &heartbeat{clock: c, key: prefix + "replicas", id: hex.EncodeToString(b[:]), every: HeartbeatEvery, ttl: HeartbeatTTL}
}

// due reports whether the caller should beat now; it returns true to one
// caller per interval.
func (h *heartbeat) due() bool {
	next := h.next.Load()
	t := h.clock.Now().UnixNano()
	return t >= next && h.next.CompareAndSwap(next, t+int64(h.every))
}

// args returns the ARGV of a beat after now: the id and the TTL in µs.
func (h *heartbeat) args() (id string, ttlMicros int64) {
	return h.id, Micros(h.ttl)
}

// beat runs heartbeat_call.lua, a beat on its own (now is "" for Redis's
// TIME), and records the count. Most beats ride on a reserve call instead
// (Store.reserveGroup).
func (h *heartbeat) beat(ctx context.Context, rdb redis.Scripter, now any) (int64, error) {
	id, ttl := h.args()
	n, err := heartbeatScript.Run(ctx, rdb, []string{h.key}, now, id, ttl).Int64()
	if err != nil {
		return 0, fmt.Errorf("throttle: redis heartbeat: %w", err)
	}
	h.record(n)
	return n, nil
}

// record remembers a count of live replicas returned by Redis. Beats are
// at least one interval apart (due), so the second count recorded includes
// every peer that has made a request since this replica's first beat.
func (h *heartbeat) record(n int64) {
	if n <= 0 {
		return
	}
	if prev := h.live.Swap(n); n < prev {
		// A count that drops may be a Redis restarted with empty memory,
		// where replicas re-register one by one (1, 2, 3…): trust it
		// again only from the next beat, as at start.
		h.beats.Store(1)
		return
	}
	h.beats.Add(1)
}

// size returns the live replicas at the last beat, or 0 while no count can
// be trusted yet: before the first beat, and after it until the second
// unless the first already exceeds store.DefaultFleetSize. A first count misses
// the peers that started about when this replica did and had not beaten
// yet (when a fleet starts, its replicas count 1, 2, 3, ... in turn);
// peers beat once per interval, so the next count has them all. Until
// then the fallback assumes store.DefaultFleetSize.
func (h *heartbeat) size() int64 {
	n := h.live.Load()
	if h.beats.Load() < 2 && n < store.DefaultFleetSize {
		return 0
	}
	return n
}
