package middleware_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/middleware"
)

// epoch is the fake clocks' start: on a whole minute, so that fixed
// windows start with it.
var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newClock() *fakeclock.Clock { return fakeclock.New(epoch) }

// mustNew returns a Limiter of opts, closed at the test's end.
func mustNew(t *testing.T, opts ...middleware.Option) *middleware.Limiter {
	t.Helper()
	l, err := middleware.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ok is a handler that answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// serve runs one request through l around h (ok if nil) and returns the
// recorded response.
func serve(l *middleware.Limiter, h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	if h == nil {
		h = ok
	}
	w := httptest.NewRecorder()
	l.Handler(h).ServeHTTP(w, r)
	return w
}

// get returns a GET request of path with the headers given as name, value
// pairs.
func get(path string, hv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hv); i += 2 {
		r.Header.Set(hv[i], hv[i+1])
	}
	return r
}

// statuses runs n requests made by mk and returns their statuses.
func statuses(l *middleware.Limiter, n int, mk func() *http.Request) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = serve(l, nil, mk()).Code
	}
	return out
}

func count(codes []int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}
