package throttle_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/throttlekit/throttle"
)

// TestZeroTransport: the zero Transport sends requests through
// http.DefaultTransport as they are, and its other methods work too.
func TestZeroTransport(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	var tr throttle.Transport
	defer tr.CloseIdleConnections() // http.DefaultTransport's, for goleak
	if err := tr.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
	if m := tr.Mode(); m != throttle.ModeLocal {
		t.Fatalf("Mode() = %v, want %v", m, throttle.ModeLocal)
	}
	client := &http.Client{Transport: &tr}
	for range 2 {
		// A Transport made by New, even without rules, would retry the
		// 429 at once: the zero Transport does not.
		resp, err := client.Get(srv.URL + "/a")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || string(body) != "GET /a" {
			t.Fatalf("got %d %q, want the server's 429 %q", resp.StatusCode, body, "GET /a")
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the server saw %d requests, want 2: no retries", n)
	}
	// The same server through a Transport from New retries: the test
	// above tells the zero Transport apart.
	made := throttle.NewTransport(nil)
	resp, err := (&http.Client{Transport: made}).Get(srv.URL + "/a")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if n := hits.Load(); n != 2+3 {
		t.Fatalf("a Transport from New: the server saw %d requests in all, want 5 (3 attempts)", n)
	}
}
