package throttle

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// TestRedisCutRetimesOtherReplicas: replica B's ten requests sleep on
// slots 50 ms apart, booked at the rule's rate, when replica A's cap (a
// rejection's, which retimes) cuts the shared bucket to half the rule. B hears of the re-timing on the
// namespace's channel and its waiters leave as if booked under the cap:
// the last one about 400 ms later than booked, the ten spread over about
// 0.8 s rather than 0.45. (Before, the store moved its next slot only,
// and the ten left on their old times into a window the cut said was
// full.)
func TestRedisCutRetimesOtherReplicas(t *testing.T) {
	t.Parallel()
	s := newPauseScene(t)
	// B's first request opens its subscription.
	if err := roundTrip(s.b, newReq(t, s.ctx, http.MethodGet, s.api.URL)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the subscription settles, the bucket drains

	req := newReq(t, s.ctx, http.MethodGet, s.api.URL)
	bs, err := s.a.buckets(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for range 10 {
		wg.Go(func() {
			if err := roundTrip(s.b, newReq(t, s.ctx, http.MethodGet, s.api.URL)); err != nil {
				t.Errorf("B: %v", err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := s.a.store.Limit(s.ctx, bs[0], store.Cap{Rate: 10, Span: 5 * time.Second, Retime: true}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Booked at the rule, the ten leave by 450 ms; stretched from about
	// 50 ms on by two, the last leaves at about 850 ms.
	if n := s.got.between(start.Add(650*time.Millisecond), start.Add(time.Hour)); n < 1 {
		t.Errorf("no request of B left 650 ms or more after the start: its waiters kept their old slots")
	}
	if n := s.got.between(start, start.Add(time.Hour)); n != 10 {
		t.Errorf("%d of B's requests arrived, want all 10", n)
	}
}
