package throttle

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

// A deep queue on one endpoint must not hold other endpoints behind it in
// the account-wide bucket: the account-wide bucket of a request waiting for
// its endpoint is booked when the request departs.
func TestTransportDeferredBuckets(t *testing.T) {
	clk := fakeclock.New(epoch)
	paths := make(chan string, 16)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		paths <- r.URL.Path
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(clk), WithHeadroom(0), WithRules(
		Rule{Name: "global", Limit: Limit{Rate: 100, Period: time.Second, Burst: 10}},
		Rule{Name: "slow-endpoint", Limit: Limit{Rate: 5, Period: time.Second, Burst: 1}, Match: Match{PathPrefix: "/slow"}},
	))
	ctx := context.Background()
	// One /slow request goes at once; four more queue 200 ms apart.
	if err := roundTrip(tr, newReq(t, ctx, http.MethodGet, "http://x/slow")); err != nil {
		t.Fatal(err)
	}
	<-paths
	done := make(chan error, 4)
	for i := range 4 {
		go func() { done <- roundTrip(tr, newReq(t, ctx, http.MethodGet, "http://x/slow")) }()
		clk.WaitTimers(i + 1)
	}
	// The global bucket holds only the first /slow request: the queued
	// ones are not booked in it yet.
	if got, want := localOf(t, tr).TAT("global"), epoch.UnixNano()+int64(10*time.Millisecond); got != want {
		t.Fatalf("global TAT epoch+%v, want epoch+10ms: queued requests were booked ahead", time.Duration(got-epoch.UnixNano()))
	}
	// So nine /fast requests (the rest of the burst) go at once.
	for range 9 {
		if err := roundTrip(tr, newReq(t, ctx, http.MethodGet, "http://x/fast")); err != nil {
			t.Fatal(err)
		}
		if p := <-paths; p != "/fast" {
			t.Fatalf("sent %s, want /fast", p)
		}
	}
	// Each queued /slow request books the global bucket when it departs,
	// one every 200 ms.
	for i := range 4 {
		clk.Advance(200 * time.Millisecond)
		if p := <-paths; p != "/slow" {
			t.Fatalf("advance %d sent %s, want /slow", i, p)
		}
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
