package fleettest_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
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

// TestServerFixedWindow: a fixed window counts from the server's epoch,
// starts afresh at each window's end and names that end as its reset.
func TestServerFixedWindow(t *testing.T) {
	// Two seconds: three loopback requests never take a whole window, so
	// the check never has to be voided.
	const window = 2 * time.Second
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{
		Limit: 2, Window: window, Kind: fleettest.FixedWindow, Shape: fleettest.ShapeXRLUnixMillis,
	}))
	// Start at the beginning of a window, so that three requests fall in
	// it even on a slow machine.
	next := func() time.Time {
		k := srv.Offset(time.Now())/window + 1
		return srv.Epoch().Add(k * window)
	}
	end := next()
	time.Sleep(time.Until(end) + 5*time.Millisecond)
	end = end.Add(window)
	for i, want := range []struct {
		code      int
		remaining string
	}{{200, "1"}, {200, "0"}, {429, "0"}} {
		code, h := get(t, srv.URL, "0")
		if code != want.code || h.Get("X-RateLimit-Remaining") != want.remaining {
			t.Errorf("request %d: %d remaining %q, want %d %q", i+1, code, h.Get("X-RateLimit-Remaining"), want.code, want.remaining)
		}
		if got, want := h.Get("X-RateLimit-Reset"), strconv.FormatInt(end.UnixMilli()+1, 10); got != want && got != strconv.FormatInt(end.UnixMilli(), 10) {
			t.Errorf("request %d: reset %q, want the window's end %q", i+1, got, want)
		}
	}
	if time.Now().After(end) {
		t.Errorf("three requests took longer than the whole %v window: the answers above are not of one window", window)
	}
	time.Sleep(time.Until(end) + 5*time.Millisecond)
	if code, h := get(t, srv.URL, "0"); code != http.StatusOK || h.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("in the next window: %d remaining %q, want 200 and 1", code, h.Get("X-RateLimit-Remaining"))
	}
}

// TestServerRefuse: during a refusal every request is rejected in the
// quota's shape, with the time left, and none is counted.
func TestServerRefuse(t *testing.T) {
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: 10, Window: time.Hour, Shape: fleettest.ShapeIETF}))
	get(t, srv.URL, "0")
	from := srv.Offset(time.Now())
	srv.Refuse(fleettest.Window{From: from, To: from + 1500*time.Millisecond})
	for range 3 {
		code, h := get(t, srv.URL, "0")
		if code != http.StatusTooManyRequests || h.Get("Retry-After") != "2" || h.Get("RateLimit") != `"default";r=0;t=2` {
			t.Errorf("in the refusal: %d Retry-After %q RateLimit %q, want 429, 2 and r=0;t=2", code, h.Get("Retry-After"), h.Get("RateLimit"))
		}
	}
	time.Sleep(time.Until(srv.Epoch().Add(from + 1500*time.Millisecond)))
	if code, h := get(t, srv.URL, "0"); code != http.StatusOK || !strings.Contains(h.Get("RateLimit"), "r=8;") {
		t.Errorf("after the refusal: %d RateLimit %q, want 200 and r=8 (refused requests not counted)", code, h.Get("RateLimit"))
	}
}

// TestServerSlidingReset: a sliding log's reset is when its oldest counted
// request leaves; OpenAI's replenishment when its newest does.
func TestServerSlidingReset(t *testing.T) {
	srv := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: 5, Window: 10 * time.Second, Shape: fleettest.ShapeOpenAI}))
	get(t, srv.URL, "0")
	time.Sleep(1100 * time.Millisecond)
	_, h := get(t, srv.URL, "0")
	d, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-Requests"))
	if err != nil || d < 9900*time.Millisecond || d > 10*time.Second {
		t.Errorf("replenished in %q (%v), want just under 10s (the newest request's)", h.Get("X-Ratelimit-Reset-Requests"), err)
	}
	srv2 := fleettest.NewServer(t, fleettest.WithQuota(fleettest.Quota{Limit: 5, Window: 10 * time.Second, Shape: fleettest.ShapeXRLDeltaFrac}))
	get(t, srv2.URL, "0")
	time.Sleep(1100 * time.Millisecond)
	_, h = get(t, srv2.URL, "0")
	if r, err := strconv.ParseFloat(h.Get("X-RateLimit-Reset"), 64); err != nil || r < 8.0 || r > 8.9 {
		t.Errorf("reset %q, want about 8.9 (the oldest request's)", h.Get("X-RateLimit-Reset"))
	}
}
