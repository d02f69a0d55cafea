package fleettest

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/throttlekit/throttle/internal/algorithm"
)

// Quota makes the server enforce a strict limit, as a real API does: a
// request is answered with a rejection when the window already counts
// Limit accepted requests, and rejected requests do not count. The zero
// Quota (Limit 0) enforces nothing.
type Quota struct {
	Limit  int
	Window time.Duration
	// Kind is how the window counts; the zero value is [SlidingLog].
	Kind WindowKind
	// UnixAligned aligns a FixedWindow's windows to multiples of Window
	// since the Unix epoch, as a client's throttle.FixedWindow rule aligns
	// its own by default, instead of to the server's start.
	UnixAligned bool

	// Shape words the answers: the rate-limit fields of every answer and
	// the form of a rejection. The zero Shape says nothing: a rejection is
	// a bare 429.
	Shape Shape

	// The fields below are the older spelling of three shapes' parts,
	// kept for the tests written with them; they may be combined with
	// each other but not with a named Shape (NewServer fails the test).
	//
	// RetryAfter adds "Retry-After: s" to every 429: the whole seconds,
	// rounded up and at least 1, until the next slot frees (ShapeRetryAfter).
	RetryAfter bool
	// RateLimitHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (delta seconds until the window resets, rounded
	// up) to every response (ShapeXRLDelta's fields).
	RateLimitHeaders bool
	// IETFHeaders adds the IETF draft's (-10) RateLimit-Policy
	// ("default";q=Limit;w=Window in whole seconds, rounded up) and
	// RateLimit ("default";r=remaining;t=reset as above) to every response
	// (ShapeIETF's fields).
	IETFHeaders bool
}

// shape returns the shape q's answers are worded in.
func (q Quota) shape() Shape {
	if !q.RetryAfter && !q.RateLimitHeaders && !q.IETFHeaders {
		return q.Shape
	}
	s := Shape{Name: "legacy"}
	if q.RetryAfter {
		s.reject = retryAfterSeconds
	}
	xrl, ietf := ShapeXRLDelta.fields, ShapeIETF.fields
	s.fields = func(a Answer, h http.Header) {
		if q.RateLimitHeaders {
			xrl(a, h)
		}
		if q.IETFHeaders {
			ietf(a, h)
		}
	}
	return s
}

// WindowKind is how a strict server counts a window.
type WindowKind int

const (
	// SlidingLog counts the requests accepted in the half-open interval
	// (now-Window, now]. Its reset is when the oldest of them leaves.
	SlidingLog WindowKind = iota
	// FixedWindow counts the requests accepted in the current window:
	// windows of Window each, aligned to the server's epoch (or, with
	// Quota.UnixAligned, to multiples of Window since the Unix epoch), the
	// count starting afresh at each window's end, which is its reset.
	FixedWindow
	// SlidingCounter estimates the count of the trailing Window as
	// throttle.SlidingCounter does (internal/algorithm's counter, on
	// windows aligned to the Unix epoch): the previous window's count
	// weighted by the part of it still inside, plus the current window's.
	// It sends no rate-limit headers (its zero Shape).
	SlidingCounter
)

func (k WindowKind) String() string {
	switch k {
	case FixedWindow:
		return "fixed"
	case SlidingCounter:
		return "sliding-counter"
	}
	return "sliding"
}

// validate reports what makes q unusable.
func (q Quota) validate() error {
	switch {
	case q.Limit > 0 && q.Window <= 0:
		return errors.New("fleettest: a Quota with a Limit needs a Window > 0")
	case q.Shape.Name != "" && (q.RetryAfter || q.RateLimitHeaders || q.IETFHeaders):
		return errors.New("fleettest: set a Quota's Shape or its RetryAfter/RateLimitHeaders/IETFHeaders, not both")
	}
	return nil
}

// counter is the state of a strict window.
type counter struct {
	kind   WindowKind
	limit  int
	window time.Duration

	// SlidingLog: the arrival times of the accepted requests still in the
	// window, sorted.
	accepted []time.Duration
	// FixedWindow: the accepted requests of each recent window, by index.
	counts map[int64]int
	// unixAt converts an offset from the epoch to Unix µs, for the
	// windows aligned to the Unix epoch (UnixAligned, SlidingCounter).
	unixAt func(time.Duration) int64
	// SlidingCounter: the counts of the recent windows.
	sc algorithm.Counts
}

// verdict is a counter's decision on one request; its times are offsets
// from the epoch, as [Answer] defines them.
type verdict struct {
	ok                 bool // accepted, and counted
	remaining          int
	reset, replenished time.Duration
	retryAfter         time.Duration // for a rejection: until a slot frees
}

// take decides one request arriving at at (an offset from the epoch) and
// counts it when accepted.
func (c *counter) take(at time.Duration) verdict {
	if c.kind == SlidingCounter {
		w := algorithm.Window{Period: c.window.Microseconds(), Quota: int64(c.limit)}
		t := max(c.unixAt(at), c.sc.Last)
		ok := algorithm.CounterAt(w, &c.sc, t, 0, 1) == t
		if ok {
			algorithm.CounterBook(w, &c.sc, t, t, 1)
		}
		return verdict{ok: ok, retryAfter: c.window / 10}
	}
	if c.kind == FixedWindow {
		var shift time.Duration
		if c.unixAt != nil {
			// Offsets shifted so that window k starts on a multiple of
			// the window since the Unix epoch.
			shift = time.Duration(c.unixAt(0)%c.window.Microseconds()) * time.Microsecond
		}
		k := int64((at + shift) / c.window)
		if c.counts == nil {
			c.counts = make(map[int64]int)
		}
		ok := c.counts[k] < c.limit
		if ok {
			c.counts[k]++
		}
		// Handlers race between reading the clock and taking the lock:
		// a request of the previous window may come after this one.
		for old := range c.counts {
			if old < k-1 {
				delete(c.counts, old)
			}
		}
		end := time.Duration(k+1)*c.window - shift
		return verdict{ok: ok, remaining: c.limit - c.counts[k], reset: end, replenished: end, retryAfter: end - at}
	}
	// Forget accepted requests that left the window (now-Window, now].
	i := 0
	for i < len(c.accepted) && c.accepted[i] <= at-c.window {
		i++
	}
	c.accepted = c.accepted[i:]
	ok := len(c.accepted) < c.limit
	if ok {
		// Handlers race between reading the clock and taking the lock;
		// keep the list sorted so pruning stays correct.
		j, _ := slices.BinarySearch(c.accepted, at)
		c.accepted = slices.Insert(c.accepted, j, at)
	}
	if len(c.accepted) == 0 {
		return verdict{ok: ok, remaining: c.limit, reset: at + c.window, replenished: at}
	}
	oldest, newest := c.accepted[0], c.accepted[len(c.accepted)-1]
	return verdict{
		ok: ok, remaining: c.limit - len(c.accepted),
		reset: oldest + c.window, replenished: newest + c.window, retryAfter: oldest + c.window - at,
	}
}

// Refuse makes the server reject every request that arrives in w (offsets
// from the epoch, see [Server.Offset]), as a provider that stops serving
// for a while: each rejection is worded in the quota's shape with nothing
// remaining, its reset and retry at w's end (Retry-After names the time
// left, rounded as the shape rounds), and counts against no quota. A
// server without a Quota words them as the zero Shape: bare 429s. Refuse
// may be called while requests arrive, and more than once.
func (s *Server) Refuse(w Window) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals = append(s.refusals, w)
}

// applyQuotaLocked decides the answer under the refusals and the quota,
// and counts an accepted request. s.mu must be held.
func (s *Server) applyQuotaLocked(at time.Duration) Response {
	q := s.quota
	wall := func(d time.Duration) time.Time { return s.epoch.Add(d) }
	for _, w := range s.refusals {
		if at >= w.From && at < w.To {
			return s.shape.Encode(Answer{
				Now: wall(at), Limit: q.Limit, Window: q.Window,
				Reset: wall(w.To), Replenished: wall(w.To),
				Rejected: true, RetryAfter: w.To - at,
			})
		}
	}
	if q.Limit <= 0 {
		return Response{}
	}
	v := s.counter.take(at)
	a := Answer{
		Now: wall(at), Limit: q.Limit, Window: q.Window, Remaining: v.remaining,
		Reset: wall(v.reset), Replenished: wall(v.replenished),
	}
	if !v.ok {
		a.Rejected, a.RetryAfter = true, v.retryAfter
	}
	return s.shape.Encode(a)
}
