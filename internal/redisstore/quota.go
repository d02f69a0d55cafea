package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/algorithm"
	"github.com/throttlekit/throttle/internal/store"
)

var (
	//go:embed quota.lua
	quotaLua    string
	quotaScript = redis.NewScript(quotaLua)
)

var _ store.QuotaReader = (*Store)(nil)

// Quotas reads the room of each bucket of bs (see store.QuotaReader): one
// read-only script call per hash tag group, the maths in Go. A bucket
// with a cap or pause in force is read as its rule's (the middleware,
// its one user, sets neither).
func (s *Store) Quotas(ctx context.Context, bs []store.Bucket) ([]store.Quota, error) {
	out := make([]store.Quota, len(bs))
	groups := s.callGroups(bs)
	for _, g := range groups {
		q := quotaRead{keys: make([]string, len(g)), windows: make([]int64, len(g))}
		for j, i := range g {
			q.keys[j] = s.cachedKey(&bs[i])
			if bs[i].Algorithm == store.SlidingLog {
				q.windows[j] = windowMicros(&bs[i])
			}
		}
		var vals []string
		var now int64
		var err error
		if len(groups) == 1 && !s.split {
			// Every key of the store shares the namespace's hash tag:
			// concurrent reads may go as one call.
			vals, now, err = s.quotas.read(ctx, s, q)
		} else {
			vals, now, err = s.readQuotas(ctx, []quotaRead{q})
		}
		if err != nil {
			return nil, err
		}
		for j, i := range g {
			qt, err := quotaOf(&bs[i], vals[j], now)
			if err != nil {
				return nil, err
			}
			out[i] = qt
		}
	}
	return out, nil
}

// quotaRead is one request's keys for quota.lua, with each key's sliding
// log window (0 for the others).
type quotaRead struct {
	keys    []string
	windows []int64
}

// readQuotas runs quota.lua once for the keys of every read of rs (which
// share one hash tag) and returns their values in order, and Redis's now.
func (s *Store) readQuotas(ctx context.Context, rs []quotaRead) ([]string, int64, error) {
	n := 0
	for _, r := range rs {
		n += len(r.keys)
	}
	keys := make([]string, 0, n)
	args := make([]any, 1, 1+n)
	args[0] = s.nowArg()
	for _, r := range rs {
		keys = append(keys, r.keys...)
		for _, w := range r.windows {
			args = append(args, w)
		}
	}
	cmd, err := s.runScript(ctx, store.CallQuota, quotaScript, keys, args...)
	if err != nil {
		return nil, 0, err
	}
	reply, err := cmd.Slice()
	if err != nil || len(reply) != 1+n {
		return nil, 0, fmt.Errorf("%w: quota: %v", errRedisReply, reply)
	}
	now, ok := reply[0].(int64)
	if !ok {
		return nil, 0, fmt.Errorf("%w: quota: now %v", errRedisReply, reply[0])
	}
	vals := make([]string, n)
	for i := range vals {
		if vals[i], ok = reply[1+i].(string); !ok {
			return nil, 0, fmt.Errorf("%w: quota: %v", errRedisReply, reply[1+i])
		}
	}
	return vals, now, nil
}

// quotaOf works out bucket b's room at now (µs) from its value v as
// quota.lua read it: as internal/localstore's quotaLocked does from its
// own state.
func quotaOf(b *store.Bucket, v string, now int64) (store.Quota, error) {
	nums, err := parseInts(v)
	if err != nil {
		return store.Quota{}, err
	}
	if !b.Algorithm.Windowed() {
		var tat int64
		if len(nums) > 0 {
			tat = nums[0]
		}
		iv := max(Micros(b.Interval), 1)
		fill := max(tat-now, 0)
		used := (fill + iv - 1) / iv
		return store.Quota{Remaining: max(b.Burst-used, 0), Reset: time.Duration(fill) * time.Microsecond}, nil
	}
	p, anchor, edge := b.WindowMicros()
	w := algorithm.Window{Period: p, Quota: b.Burst, Anchor: anchor, Edge: edge}
	var at func(cost int64) int64
	switch b.Algorithm {
	case store.SlidingLog:
		l := algorithm.Log{E: nums}
		w.Period = max(windowMicros(b), 1)
		at = func(cost int64) int64 { return algorithm.LogAt(w, &l, now, 0, cost) }
	default:
		var c algorithm.Counts
		if len(nums) >= 2 {
			c = algorithm.Counts{Last: nums[0], First: nums[1], N: nums[2:]}
		}
		if b.Algorithm == store.FixedWindow {
			at = func(cost int64) int64 { return algorithm.FixedAt(w, &c, now, 0, cost) }
		} else {
			at = func(cost int64) int64 { return algorithm.CounterAt(w, &c, now, 0, cost) }
		}
	}
	lo, hi := int64(0), b.Burst // the largest cost that departs now
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if at(mid) <= now {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	reset := at(b.Burst) - now
	if b.Algorithm == store.FixedWindow && lo < b.Burst {
		reset = w.Start(now) + w.Period - now
	}
	return store.Quota{Remaining: lo, Reset: time.Duration(max(reset, 0)) * time.Microsecond}, nil
}

// parseInts parses a space-separated list of integers ("" is none).
func parseInts(v string) ([]int64, error) {
	fields := strings.Fields(v)
	out := make([]int64, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			// A rate or slope of a cap is a float: only the leading
			// integers matter here.
			if fl, ferr := strconv.ParseFloat(f, 64); ferr == nil {
				n = int64(fl)
			} else {
				return nil, fmt.Errorf("%w: quota: %q", errRedisReply, v)
			}
		}
		out = append(out, n)
	}
	return out, nil
}
