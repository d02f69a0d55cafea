package throttletest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/throttletest"
)

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// t0 is the unit tests' fake start: 10:00:00.250 UTC, a quarter second
// into a second and at the start of an hour.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 250_000_000, time.UTC)

// newHandler returns a Handler simulating p on a fake clock at t0.
func newHandler(t *testing.T, p throttletest.Profile, opts ...throttletest.Option) (*throttletest.Handler, *throttletest.FakeClock) {
	t.Helper()
	fc := throttletest.NewFakeClock(t0)
	h, err := throttletest.NewHandler(p, append(opts, throttletest.WithClock(fc))...)
	if err != nil {
		t.Fatal(err)
	}
	return h, fc
}

// serve sends one request to h in process and returns the answer.
func serve(h http.Handler, method, target string, header http.Header, body string) *http.Response {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	for k, v := range header {
		r.Header[k] = v
	}
	if body != "" && r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// decode reads a response's JSON body into a generic value.
func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("body: %v", err)
	}
	return v
}

func mustAtoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
