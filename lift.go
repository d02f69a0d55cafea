package throttle

import (
	"sync"
	"sync/atomic"
	"time"
)

// liftGate decides which lifts this process sends to the store. A lift
// reads a success that reports plenty remaining, which is nearly every
// response, so sending each would double the store's traffic for nothing:
// most buckets are not held below their rule. The gate sends one only for
// a bucket this process has cut hard (on a rejection) within the longest a
// recovery can take, and not braked since, and at most twice per the
// lift's cooldown, so that a lift the store turns down (it counts the cooldown from the bucket's last change, which
// may be another replica's) is sent again within half a window of its
// time; the store decides whether the bucket is held, and by what (a
// spread is never lifted).
//
// Another replica's cut is lifted by that replica: it read the same
// server, and any one lift serves the whole fleet.
type liftGate struct {
	mu sync.Mutex
	// buckets maps a bucket key to this process's last hard cut of it and
	// the earliest time it may send a lift, Unix nanoseconds.
	buckets map[string]liftState
	// tracked is len(buckets), read without mu: a lift for a process
	// that cut nothing, nearly every response's case, is dropped without
	// the lock.
	tracked atomic.Int32
}

type liftState struct {
	cut, next int64
}

// maxRecovery bounds how long a cut holds a bucket: from the rate's floor
// back to the rule at the slow recovery's pace.
const maxRecovery = time.Duration((1 - minRateFraction) / recoverPerSecond * float64(time.Second))

func newLiftGate() *liftGate { return &liftGate{buckets: make(map[string]liftState)} }

// filter returns f as the store should get it at now, for buckets bs: cuts
// are recorded and pass, and a lift passes only where due (see liftGate).
func (g *liftGate) filter(bs []bucket, f feedback, now time.Time) feedback {
	if f.slow.factor == 0 && (f.lift.share == 0 || g.tracked.Load() == 0) {
		f.lift = lift{}
		return f
	}
	at := now.UnixNano()
	g.mu.Lock()
	defer func() {
		g.tracked.Store(int32(len(g.buckets)))
		g.mu.Unlock()
	}()
	if f.slow.factor > 0 && !f.slow.fromFree {
		// A brake: the fleet is at the quota's edge again, so whatever
		// a hard cut took too much is won back; the slow recovery and
		// the brakes hold it there, and a lift now would only answer
		// the brake's reading noise.
		for _, b := range bs {
			delete(g.buckets, b.key)
		}
		return f
	}
	if f.slow.factor > 0 {
		for k, st := range g.buckets {
			if at-st.cut >= int64(maxRecovery) {
				delete(g.buckets, k) // recovered by now: no trail
			}
		}
		for _, b := range bs {
			st := g.buckets[b.key]
			g.buckets[b.key] = liftState{cut: at, next: max(st.next, at+int64(f.slow.cooldown))}
		}
		return f
	}
	due := false
	for _, b := range bs {
		st, ok := g.buckets[b.key]
		if ok && at-st.cut < int64(maxRecovery) && at >= st.next {
			due = true
			st.next = at + int64(f.lift.cooldown)/2
			g.buckets[b.key] = st
		}
	}
	if !due {
		f.lift = lift{}
	}
	return f
}
