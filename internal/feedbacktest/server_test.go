package feedbacktest

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fleettest"
)

// dialect is the rate-limit header style of a strictServer.
type dialect int

const (
	// ietfHeaders: RateLimit-Policy and RateLimit (draft -10) on every
	// response, Retry-After on 429.
	ietfHeaders dialect = iota
	// xRateLimitHeaders: X-RateLimit-Limit/-Remaining/-Reset (delta
	// seconds) on every response, Retry-After on 429.
	xRateLimitHeaders
	// retryAfterOnly: nothing but Retry-After, on 429 only.
	retryAfterOnly
)

func (d dialect) String() string {
	switch d {
	case ietfHeaders:
		return "IETF"
	case xRateLimitHeaders:
		return "X-RateLimit"
	default:
		return "Retry-After only"
	}
}

// strictServer enforces limit requests per window on a strict sliding
// window, as a real API does: a request is answered 429 when limit requests
// were already accepted in the window before it; rejected requests do not
// count. Its headers are what such a server can honestly say:
//
//   - remaining: limit minus the requests accepted in the window, this one
//     included;
//   - reset (IETF t, X-RateLimit-Reset, Retry-After): the whole seconds,
//     rounded up, until the oldest accepted request leaves the window,
//     which is when the next slot frees. Rounding up is what a server
//     must do with integer seconds: rounding down would invite requests
//     it then rejects. Retry-After is at least 1.
//
// It records every arrival as fleettest does ([fleettest.WorkerHeader]
// tells the senders apart), and answers warm-up requests without recording
// them. Its handler never fails the test.
type strictServer struct {
	URL string

	limit   int
	window  time.Duration
	dialect dialect
	epoch   time.Time

	mu       sync.Mutex
	arrivals fleettest.Arrivals
	accepted []time.Duration // arrival offsets of accepted requests in the window
}

func newStrictServer(t *testing.T, limit int, window time.Duration, d dialect) *strictServer {
	t.Helper()
	s := &strictServer{limit: limit, window: window, dialect: d}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.epoch = time.Now()
	srv.Start()
	s.URL = srv.URL
	t.Cleanup(srv.Close)
	return s
}

// Offset places t among the arrivals, as fleettest.Server.Offset does.
func (s *strictServer) Offset(t time.Time) time.Duration { return t.Sub(s.epoch) }

// Arrivals returns a copy of every arrival so far, sorted by time.
func (s *strictServer) Arrivals() fleettest.Arrivals {
	s.mu.Lock()
	out := slices.Clone(s.arrivals)
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b fleettest.Arrival) int { return int(a.At - b.At) })
	return out
}

func (s *strictServer) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Since(s.epoch)
	if r.Header.Get(fleettest.WarmUpHeader) != "" {
		time.Sleep(fleettest.WarmUpHold)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	worker := fleettest.UnknownWorker
	switch v := r.Header.Get(fleettest.WorkerHeader); v {
	case "outside":
		worker = fleettest.OutsideWorker
	default:
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			worker = n
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))

	s.mu.Lock()
	i := 0
	for i < len(s.accepted) && s.accepted[i] <= at-s.window {
		i++
	}
	s.accepted = s.accepted[i:]
	status := http.StatusOK
	if len(s.accepted) < s.limit {
		// Handlers race between reading the clock and taking the lock:
		// keep the list sorted so pruning stays right.
		j, _ := slices.BinarySearch(s.accepted, at)
		s.accepted = slices.Insert(s.accepted, j, at)
	} else {
		status = http.StatusTooManyRequests
	}
	remaining := s.limit - len(s.accepted)
	reset := 0
	if len(s.accepted) > 0 {
		reset = ceilSeconds(s.accepted[0] + s.window - at)
	}
	s.arrivals = append(s.arrivals, fleettest.Arrival{Seq: len(s.arrivals) + 1, At: at, Worker: worker, Status: status})
	s.mu.Unlock()

	h := w.Header()
	switch s.dialect {
	case ietfHeaders:
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, s.limit, ceilSeconds(s.window)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, reset))
	case xRateLimitHeaders:
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.Itoa(reset))
	}
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", strconv.Itoa(max(reset, 1)))
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "ok\n")
}

func ceilSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

// startOutside spends perSecond requests per second of s's quota from this
// process without any throttling, ignoring the answers, as another service
// sharing the API key would. It stops at the test's cleanup or when the
// returned function is called.
func (s *strictServer) startOutside(t *testing.T, perSecond float64) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	tr := &http.Transport{}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		every := time.Duration(float64(time.Second) / perSecond)
		start := time.Now()
		timer := time.NewTimer(0)
		defer timer.Stop()
		for k := 1; ; k++ {
			select {
			case <-done:
				return
			case <-timer.C:
			}
			if req, err := http.NewRequest(http.MethodGet, s.URL+"/outside", nil); err == nil {
				req.Header.Set(fleettest.WorkerHeader, "outside")
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
			timer.Reset(time.Until(start.Add(time.Duration(k) * every)))
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			tr.CloseIdleConnections()
		})
	}
	t.Cleanup(stop)
	return stop
}
