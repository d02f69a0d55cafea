package lease

import (
	"context"
	"sync"
)

// maxOrphans bounds the orphans a store remembers; beyond it, the oldest
// are left to expire by their TTL.
const maxOrphans = 4096

// orphan is a release or a withdrawal Redis did not confirm: tokens of a
// released lease (nil for none) and a ticket id ("" for none). Left alone,
// each would hold a slot or the head of a queue until its TTL ends; after
// a stall of Redis that is every request in flight at the time.
type orphan struct {
	caps   []Cap
	tokens []int64
	tid    string
}

// orphans are a store's unconfirmed releases and withdrawals, sent again
// once Redis answers (flush). Safe for concurrent use.
type orphans struct {
	mu   sync.Mutex
	list []orphan
}

// add remembers o.
func (os *orphans) add(o orphan) {
	os.mu.Lock()
	defer os.mu.Unlock()
	if len(os.list) >= maxOrphans {
		os.list = os.list[1:]
	}
	os.list = append(os.list, o)
}

// take returns and forgets every orphan.
func (os *orphans) take() []orphan {
	os.mu.Lock()
	defer os.mu.Unlock()
	l := os.list
	os.list = nil
	return l
}

// flushOrphans sends the orphans' releases again. At the first failure it
// stops, keeping that orphan and the rest for the next flush: a Redis that
// fails again must not hold the caller for a call timeout per orphan. The
// renewal loop calls it after each successful round, the Fallback at its
// probe.
func (s *Redis) flushOrphans(ctx context.Context) {
	list := s.orphans.take()
	for i, o := range list {
		if _, err := s.releaseCall(ctx, o.caps, o.tokens, o.tid); err != nil {
			for _, rest := range list[i:] {
				s.orphans.add(rest)
			}
			return
		}
	}
}
