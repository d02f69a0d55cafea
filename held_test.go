package throttle

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/feedback"
	"github.com/throttlekit/throttle/internal/redistest"
)

// TestRedisPauseReachesOtherReplicas: replica B has requests waiting for
// slots in a shared bucket when replica A is told to pause it (429,
// Retry-After). As soon as B books anything in the bucket it learns of the
// pause, and its waiters whose slots fall inside the pause book again
// after it instead of leaving into the server's rejection.
func TestRedisPauseReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ns := WithNamespace(testNamespace(t))
	got := &arrivals{}
	ts := httptest.NewServer(got)
	t.Cleanup(ts.Close)
	rule := Rule{Name: "api", Limit: Limit{Rate: 20, Period: time.Second, Burst: 1}} // a slot every 50 ms
	a := mustNew(t, nil, WithRedis(rdb), ns, WithRules(rule), WithHeadroom(0))
	b := mustNew(t, nil, WithRedis(rdb), ns, WithRules(rule), WithHeadroom(0))
	ctx := redisCtx(t)

	// B queues ten requests: slots every 50 ms from now.
	var wg sync.WaitGroup
	start := time.Now()
	for range 10 {
		wg.Go(func() {
			if err := roundTrip(b, newReq(t, ctx, http.MethodGet, ts.URL)); err != nil {
				t.Errorf("B: %v", err)
			}
		})
	}
	time.Sleep(60 * time.Millisecond)

	// A's response says: come back in a second.
	req := newReq(t, ctx, http.MethodGet, ts.URL)
	bs, err := a.buckets(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}
	paused := time.Now()
	a.listen(ctx, bs, feedback.Booking{}, resp, false)
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
