package fleettest

import (
	"net/http"
	"strconv"
	"time"
)

// CostHeader is the response header in which a [WithPoints] server tells
// what each accepted request cost.
const CostHeader = "X-Request-Cost"

// PointsCost is what a request costs a [WithPoints] server: Requested is
// taken when it arrives, and the difference from Actual given back when
// it has been served, before the answer leaves, as Shopify's GraphQL API
// does with requestedQueryCost and actualQueryCost. Actual may exceed
// Requested (the difference is then taken); a Requested of 0 means Actual.
type PointsCost struct {
	Requested, Actual int
}

// WithPoints makes the server a strict quota of points: a bucket of
// capacity points that refills at rate points per period, each request
// costing what cost says (given the request and its arrival rank, from
// 1). A request is rejected with a bare 429 when the bucket holds less
// than its requested cost, and costs nothing then; an accepted one is
// told its actual cost in [CostHeader]. It records the points actually
// spent ([Server.Points]).
func WithPoints(rate int, period time.Duration, capacity int, cost func(r *http.Request, seq int) PointsCost) ServerOption {
	return serverOptionFunc(func(s *Server) {
		s.points = &pointsQuota{perNano: float64(rate) / float64(period), capacity: float64(capacity), tokens: float64(capacity), cost: cost}
	})
}

// pointsQuota is the state of WithPoints.
type pointsQuota struct {
	perNano  float64 // points refilled per nanosecond
	capacity float64
	cost     func(*http.Request, int) PointsCost

	tokens float64
	last   time.Duration // when tokens was last brought up to date
	byAt   []pointsEntry // every accepted request, for Points
}

type pointsEntry struct {
	at     time.Duration
	points int
}

// refillLocked brings the bucket up to at. s.mu held.
func (q *pointsQuota) refillLocked(at time.Duration) {
	// Handlers race between reading the clock and taking the lock: time
	// never runs backwards for the bucket.
	if at > q.last {
		q.tokens = min(q.capacity, q.tokens+float64(at-q.last)*q.perNano)
		q.last = at
	}
}

// takeLocked decides request r, the seq-th, arriving at at, and returns
// its answer and its cost (zero when rejected). s.mu held.
func (q *pointsQuota) takeLocked(r *http.Request, seq int, at time.Duration) (Response, PointsCost) {
	q.refillLocked(at)
	c := q.cost(r, seq)
	c.Actual = max(c.Actual, 1)
	if c.Requested <= 0 {
		c.Requested = c.Actual
	}
	if q.tokens < float64(c.Requested) {
		return Response{Status: http.StatusTooManyRequests}, PointsCost{}
	}
	q.tokens -= float64(c.Requested)
	q.byAt = append(q.byAt, pointsEntry{at: at, points: c.Actual})
	return Response{Header: http.Header{CostHeader: {strconv.Itoa(c.Actual)}}}, c
}

// settleLocked gives back (or takes) the difference between a served
// request's requested and actual cost, at at. s.mu held.
func (q *pointsQuota) settleLocked(c PointsCost, at time.Duration) {
	if c.Requested == c.Actual {
		return
	}
	q.refillLocked(at)
	q.tokens = min(q.capacity, q.tokens+float64(c.Requested-c.Actual))

}

// Points returns the points the server actually spent on the requests it
// accepted between from and to (offsets from the epoch, see
// [Server.Offset]); 0 without [WithPoints].
func (s *Server) Points(from, to time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.points == nil {
		return 0
	}
	n := 0
	for _, e := range s.points.byAt {
		if e.at >= from && e.at < to {
			n += e.points
		}
	}
	return n
}
