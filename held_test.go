package throttle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/redistest"
)

// pauseScene is two replicas, A and B, of a rule of a slot every 50 ms
// shared through Redis, and the API they call, recording arrivals.
type pauseScene struct {
	a, b *Transport
	api  *httptest.Server
	got  *arrivals
	ctx  context.Context
}

func newPauseScene(t *testing.T) *pauseScene {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ns := WithNamespace(testNamespace(t))
	got := &arrivals{}
	api := httptest.NewServer(got)
	t.Cleanup(api.Close)
	rule := Rule{Name: "api", Limit: Limit{Rate: 20, Period: time.Second, Burst: 1}} // a slot every 50 ms
	return &pauseScene{
		a:   mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithHeadroom(0)),
		b:   mustNew(t, nil, sharedRedis(rdb), ns, WithRules(rule), WithHeadroom(0)),
		api: api, got: got, ctx: redisCtx(t),
	}
}

// queueThenPause sends ten requests through B on wg (slots every 50 ms
// from start), and after lead tells A to pause the bucket (pauseA).
func (s *pauseScene) queueThenPause(t *testing.T, wg *sync.WaitGroup, lead time.Duration) (start, paused time.Time) {
	start = time.Now()
	for range 10 {
		wg.Go(func() {
			if err := roundTrip(s.b, newReq(t, s.ctx, http.MethodGet, s.api.URL)); err != nil {
				t.Errorf("B: %v", err)
			}
		})
	}
	time.Sleep(lead)
	return start, s.pauseA(t)
}

// pauseA tells A, as a 429's Retry-After, to pause the bucket for a
// second, and returns when.
func (s *pauseScene) pauseA(t *testing.T) time.Time {
	t.Helper()
	req := newReq(t, s.ctx, http.MethodGet, s.api.URL)
	bs, err := s.a.buckets(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}
	paused := time.Now()
	s.a.listen(s.ctx, bs, feedback.Booking{}, resp, false)
	return paused
}

// TestRedisPauseReachesOtherReplicas: replica B has requests waiting for
// slots in a shared bucket when replica A is told to pause it (429,
// Retry-After). As soon as B books anything in the bucket it learns of the
// pause, and its waiters whose slots fall inside the pause book again
// after it instead of leaving into the server's rejection.
func TestRedisPauseReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	s := newPauseScene(t)
	got, ts, ctx, b := s.got, s.api, s.ctx, s.b

	// B queues ten requests; A's response says: come back in a second.
	var wg sync.WaitGroup
	start, paused := s.queueThenPause(t, &wg, 60*time.Millisecond)
	pauseEnd := paused.Add(time.Second)

	// B books once more: the reply tells it of the pause.
	wg.Go(func() {
		if err := roundTrip(b, newReq(t, ctx, http.MethodGet, ts.URL)); err != nil {
			t.Errorf("B, after the pause: %v", err)
		}
	})
	wg.Wait()

	// B's waiters whose slots came more than a tolerance (50 ms) after it
	// learned of the pause, and before its end, went again after it. (The
	// one whose slot comes as B learns may go: it is already leaving.)
	learned := paused.Add(50 * time.Millisecond)
	if n := got.between(learned.Add(50*time.Millisecond), pauseEnd.Add(-50*time.Millisecond)); n > 0 {
		t.Errorf("%d requests arrived inside the pause (from %v to %v after the start)", n,
			learned.Add(50*time.Millisecond).Sub(start).Round(time.Millisecond), pauseEnd.Add(-50*time.Millisecond).Sub(start).Round(time.Millisecond))
	}
	if n := got.between(start, start.Add(time.Hour)); n != 11 {
		t.Errorf("%d requests arrived, want all 11", n)
	}
}

// TestRedisPauseHeardByIdleReplica: replica B's ten requests sleep on
// slots booked before replica A is told to pause their bucket, and B books
// nothing more. B hears of the pause on the namespace's channel: none of
// its requests whose slot falls inside the pause leaves before the pause
// ends, and all of them go after it. (Before the channel, each such
// replica sent its next request into the server's rejection.)
func TestRedisPauseHeardByIdleReplica(t *testing.T) {
	t.Parallel()
	s := newPauseScene(t)
	// A's first request opens its subscription, as B's do below.
	if err := roundTrip(s.a, newReq(t, s.ctx, http.MethodGet, s.api.URL)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the subscriptions settle

	var wg sync.WaitGroup
	start, paused := s.queueThenPause(t, &wg, 120*time.Millisecond)
	pauseEnd := paused.Add(time.Second)
	wg.Wait()
	got := s.got

	// The message takes about a millisecond; a slot within the lateness
	// tolerance (50 ms) of the pause's start may already be leaving.
	from, to := paused.Add(60*time.Millisecond), pauseEnd.Add(-50*time.Millisecond)
	if n := got.between(from, to); n > 0 {
		t.Errorf("%d of B's requests arrived inside the pause (from %v to %v after the start)", n,
			from.Sub(start).Round(time.Millisecond), to.Sub(start).Round(time.Millisecond))
	}
	if n := got.between(start, start.Add(time.Hour)); n != 10 {
		t.Errorf("%d of B's requests arrived, want all 10", n)
	}
}
