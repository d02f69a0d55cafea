package localstore

import "github.com/throttlekit/throttle/internal/store"

// This file holds a bucket's credit: units of cost refunded while the
// bucket had requests booked ahead of now (store.Charger), which the next
// request that would queue takes at once. internal/redisstore's charge.lua
// and reserve.lua run the same steps in Redis, in µs.
//
// Why a credit, and why this bound. A server that takes a request's
// estimated cost when it arrives and gives the difference back once it
// has served it (Shopify's GraphQL API) holds the refunded units from that
// moment. A bucket with a queue cannot take them in its next free slot:
// that slot lies a queue's length ahead, while the server's bucket, full
// to its capacity meanwhile, loses them (measured on
// internal/concurrencytest's TestFleetActualCosts: refunds into the
// queue's end raised the fleet's departures from 35 to 42 a second where
// 50 were due, and met 1-2 rejections a run; docs/CONCURRENCY.md). They
// are worth something only now, to a request that leaves now.
//
// How much the server holds beyond what the bucket counts. Let B be the
// rule's burst and iv its interval. Just after a request departs, the room
// the bucket counted is B − (mark − departure) / iv, mark being the TAT its
// booking set (a request that queued leaves with none: mark = departure +
// B·iv). The room then grows by one unit per interval and only falls by
// later departures, so at time t it is at most B − (mark − t) / iv, for the
// mark of any request that has departed. Above its margin (a server's
// capacity less the rule's burst, the room the rule leaves unused), the
// server holds that room plus the credit; it loses whatever would pass its
// capacity. A credit of k units is thus whole at t while
// k ≤ (mark − t) / iv, and lapses with time as the room climbs back. Of two
// refunded requests' marks the later one bounds the room more tightly, so
// the credit keeps the latest. A request that takes k units of it at t
// leaves the server B − (mark − t)/iv + credit − k ≥ 0 above the margin,
// so the bookings already made keep the room they counted.

// credit is a bucket's credit: units of cost, and the latest mark of a
// refunded request, in the store's time units.
type credit struct {
	units int64
	mark  int64
}

// usable returns the units of c that are whole at now for a bucket of
// interval iv: at most (mark − now) / iv.
func (c credit) usable(now, iv int64) int64 {
	if iv <= 0 || c.mark-now < iv {
		return 0
	}
	return min(c.units, (c.mark-now)/iv)
}

// refunded returns c after a refund of d units (d > 0) of a request whose
// booking set mark, at now: the usable units plus d, within the bound of
// the later of the two marks.
func (c credit) refunded(now, iv, d, mark int64) credit {
	k := c.usable(now, iv)
	e := max(c.mark, mark)
	if iv <= 0 || e-now < iv {
		return credit{}
	}
	return credit{units: min(store.SatAdd(k, d), (e-now)/iv), mark: e}
}

// setCreditLocked stores c as key's credit at now, or drops it when none
// of it is usable. s.mu must be held.
func (s *Store) setCreditLocked(key string, c credit, now, iv int64) {
	if c.units < 1 || c.mark-now < iv {
		delete(s.credits, key)
		return
	}
	s.credits[key] = c
}

// creditLocked returns the units of key's credit usable at now for
// interval iv, and the credit. s.mu must be held.
func (s *Store) creditLocked(key string, now, iv int64) (int64, credit) {
	c, ok := s.credits[key]
	if !ok {
		return 0, credit{}
	}
	return c.usable(now, iv), c
}
