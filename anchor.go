package throttle

import (
	"net/http"
	"sync"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/store"
)

// A FixedWindow rule's windows start, by default, on multiples of its
// Period since the Unix epoch (an hourly rule resets on the hour). A
// server's fixed windows may start elsewhere: GitHub's hour starts at a
// token's first request. The Transport aligns a rule's windows to the
// reset the server names: the first answer that reports the rule's quota
// (a quota whose limit is the rule's Rate, or the answer's only quota)
// with a reset R sets the windows of the request's bucket to start at
// R mod Period; a later answer moves them only when it names a reset more
// than a second away from the windows' boundary (resets are read to the
// second: X-RateLimit-Reset is a Unix second). Requests the fleet sent
// before it learnt the anchor were counted in the server's window too:
// the rule's headroom (2 % of the quota) covers a first burst of that
// size.
//
// Only rules of a Period of a minute or more learn an anchor: a reset
// read to the second places a window of a minute to within a sixtieth of
// it, and the edge at a window's start (windowEdge, up to a second)
// covers the error; a window of a few seconds would be placed
// anywhere.

// minAnchoredPeriod is the shortest Period of a FixedWindow rule that
// learns its anchor from the server's resets (see above).
const minAnchoredPeriod = time.Minute

// anchorSlack is how far from the windows' boundary a reset must fall to
// move it: the resolution of a reset read as a Unix second.
const anchorSlack = time.Second

// maxAnchors bounds the anchors a rule keeps, one per partition key: a
// rule partitioned by millions of keys forgets them all at once and
// learns again, rather than grow without bound.
const maxAnchors = 1 << 14

// anchors is a rule's learnt window anchors, by bucket key. It is safe for
// concurrent use; the zero value is ready.
type anchors struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

func (a *anchors) get(key string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[key]
}

// learn sets key's anchor from a reset at the instant r, for windows of
// period p, unless the one it has is within anchorSlack of it.
func (a *anchors) learn(key string, r time.Time, p time.Duration) {
	anchor := time.Duration(r.UnixMicro()%p.Microseconds()) * time.Microsecond
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.m[key]; ok {
		d := (anchor - old) % p
		if d < 0 {
			d += p
		}
		if min(d, p-d) <= anchorSlack {
			return
		}
	}
	if a.m == nil || len(a.m) >= maxAnchors {
		a.m = make(map[string]time.Duration)
	}
	a.m[key] = anchor
}

// anchored reports whether c learns its windows' anchor from resets.
func (c *compiledRule) anchored() bool {
	return c.Algorithm == FixedWindow && c.Limit.Period >= minAnchoredPeriod
}

// learnAnchors reads the resets of resp for the buckets of bs whose rules
// learn their anchor (see the top of this file). It reads the headers
// again, uncapped to the rules' period: the Signal listen reads caps its
// resets at the longest wait the Transport takes from a server.
func (t *Transport) learnAnchors(bs []store.Bucket, resp *http.Response, now time.Time) {
	if !t.anchoring {
		return
	}
	var sig header.Signal
	parsed := false
	for i := range bs {
		c := t.rule(bs[i].Rule)
		if c == nil || !c.anchored() {
			continue
		}
		if !parsed {
			sig = header.Parse(resp.StatusCode, resp.Header, now, t.maxAnchorPeriod, t.dialects...)
			parsed = true
		}
		if q, ok := quotaOf(sig, int64(c.Limit.Rate)); ok && q.HasReset && q.Reset > 0 && q.Reset <= c.Limit.Period {
			c.anchors.learn(bs[i].Key, now.Add(q.Reset), c.Limit.Period)
		}
	}
}

// quotaOf returns the quota of sig whose limit is rate, or its only quota
// with a reset.
func quotaOf(sig header.Signal, rate int64) (header.Quota, bool) {
	var only header.Quota
	n := 0
	for _, q := range sig.Quotas {
		if q.HasLimit && q.Limit == rate {
			return q, true
		}
		if q.HasReset {
			only, n = q, n+1
		}
	}
	return only, n == 1
}
