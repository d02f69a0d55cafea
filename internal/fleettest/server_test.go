package fleettest_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
)

// get sends a GET as worker id and returns the status and Retry-After.
func get(t *testing.T, url, id string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		req.Header.Set(fleettest.WorkerHeader, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestServerRecordsArrivals(t *testing.T) {
	srv := fleettest.NewServer(t)
	before := time.Now()
	for _, id := range []string{"0", "3", "", "nope"} {
		if code, _ := get(t, srv.URL, id); code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	after := time.Now()
	got := srv.Arrivals()
	if len(got) != 4 || srv.Count() != 4 {
		t.Fatalf("recorded %d arrivals (Count %d), want 4", len(got), srv.Count())
	}
	wantWorkers := []int{0, 3, fleettest.UnknownWorker, fleettest.UnknownWorker}
	for i, a := range got {
		if a.Seq != i+1 || a.Worker != wantWorkers[i] || a.Status != http.StatusOK {
			t.Errorf("arrival %d = %+v, want seq %d worker %d status 200", i, a, i+1, wantWorkers[i])
		}
		if a.At < srv.Offset(before) || a.At > srv.Offset(after) {
			t.Errorf("arrival %d at %v, outside [%v, %v]", i, a.At, srv.Offset(before), srv.Offset(after))
		}
	}
	if n := len(got.Fleet()); n != 2 {
		t.Errorf("Fleet() has %d arrivals, want 2", n)
	}
	if n := len(got.FromWorker(3)); n != 1 {
		t.Errorf("FromWorker(3) has %d arrivals, want 1", n)
	}
}

func TestServerRespondNth(t *testing.T) {
	srv := fleettest.NewServer(t, fleettest.RespondNth(2, fleettest.Response{
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"2"}},
	}))
	for i, want := range []struct {
		code       int
		retryAfter string
	}{{200, ""}, {429, "2"}, {200, ""}} {
		code, h := get(t, srv.URL, "0")
		if code != want.code || h.Get("Retry-After") != want.retryAfter {
			t.Errorf("request %d: %d Retry-After %q, want %d %q", i+1, code, h.Get("Retry-After"), want.code, want.retryAfter)
		}
	}
	if n := len(srv.Arrivals().Status(http.StatusTooManyRequests)); n != 1 {
		t.Errorf("recorded %d 429s, want 1", n)
	}
}

func TestServerQuota(t *testing.T) {
	for _, tc := range []struct {
		name       string
		quota      fleettest.Quota
		retryAfter bool
		headers    bool
	}{
		{"bare", fleettest.Quota{Limit: 3, Window: time.Hour}, false, false},
		{"retry-after", fleettest.Quota{Limit: 3, Window: time.Hour, RetryAfter: true}, true, false},
		{"rate-limit headers", fleettest.Quota{Limit: 3, Window: time.Hour, RateLimitHeaders: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fleettest.NewServer(t, fleettest.WithQuota(tc.quota))
			wantCodes := []int{200, 200, 200, 429, 429}
			wantRemaining := []string{"2", "1", "0", "0", "0"}
			for i, want := range wantCodes {
				code, h := get(t, srv.URL, "0")
				if code != want {
					t.Errorf("request %d: status %d, want %d", i+1, code, want)
				}
				switch ra := h.Get("Retry-After"); {
				case tc.retryAfter && code == 429 && ra != "3600":
					t.Errorf("request %d: Retry-After %q, want 3600", i+1, ra)
				case (!tc.retryAfter || code != 429) && ra != "":
					t.Errorf("request %d: unexpected Retry-After %q", i+1, ra)
				}
				if rem := h.Get("X-RateLimit-Remaining"); tc.headers && rem != wantRemaining[i] {
					t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i+1, rem, wantRemaining[i])
				} else if !tc.headers && rem != "" {
					t.Errorf("request %d: unexpected X-RateLimit-Remaining %q", i+1, rem)
				}
			}
		})
	}
}

func TestServerQuotaSlides(t *testing.T) {
	const window = 300 * time.Millisecond
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: 2, Window: window}))
	for range 2 {
		get(t, srv.URL, "0")
	}
	if code, _ := get(t, srv.URL, "0"); code != http.StatusTooManyRequests {
		t.Fatalf("third request in the window: %d, want 429", code)
	}
	time.Sleep(window + 50*time.Millisecond)
	if code, _ := get(t, srv.URL, "0"); code != http.StatusOK {
		t.Fatalf("after the window slid: %d, want 200", code)
	}
}

func TestOutsideConsumer(t *testing.T) {
	srv := fleettest.NewServer(t)
	const rate = 40.0
	begin := time.Now()
	stop := srv.StartOutside(t, rate)
	time.Sleep(time.Second)
	stop()
	elapsed := time.Since(begin).Seconds()
	stop() // idempotent
	n := len(srv.Arrivals().FromWorker(fleettest.OutsideWorker))
	// A fixed schedule sends one at 0 and one per 1/rate after. The
	// bounds are loose on the low side (a starved goroutine catches up
	// late) and exact on the high side: it must never send faster.
	if hi := int(rate*elapsed) + 1; n > hi || n < hi/2 {
		t.Errorf("outside consumer sent %d requests in %.2f s at %v/s, want ≤ %d and ≥ %d", n, elapsed, rate, hi, hi/2)
	}
	after := srv.Count()
	time.Sleep(100 * time.Millisecond)
	if srv.Count() != after {
		t.Error("outside consumer still sending after stop")
	}
}
