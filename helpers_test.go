package throttle

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
	"github.com/throttlekit/throttle/internal/localstore"
)

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// okBase answers every request with a canned 200, without a network.
var okBase = rtFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
})

// recBody is a request body that records how often it was closed.
type recBody struct {
	io.Reader
	closed atomic.Int32
}

func newRecBody() *recBody      { return &recBody{Reader: strings.NewReader("payload")} }
func (b *recBody) Close() error { b.closed.Add(1); return nil }

// Closes returns how often b was closed.
func (b *recBody) Closes() int32 { return b.closed.Load() }

// newReq returns a request for url with the given headers ("K", "V", ...).
func newReq(t testing.TB, ctx context.Context, method, url string, kv ...string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// mustNew builds a Transport or fails the test.
func mustNew(t testing.TB, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	tr, err := New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func localOf(t testing.TB, tr *Transport) *localstore.Store {
	t.Helper()
	s, ok := tr.store.(*localstore.Store)
	if !ok {
		t.Fatalf("store is %T, want *localstore.Store", tr.store)
	}
	return s
}

// roundTrip sends r through tr and closes any response body.
func roundTrip(tr http.RoundTripper, r *http.Request) error {
	resp, err := tr.RoundTrip(r)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

// fillBucket books the one slot of a burst-1 rule and returns the rule's
// Transport (fake clock at epoch, headroom 0, interval 1 s).
func fillBucket(t *testing.T, base http.RoundTripper, opts ...Option) (*Transport, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(time.Now())
	return fillBucketOn(t, clk, base, opts...), clk
}

// fillBucketOn is fillBucket with the fake clock given.
func fillBucketOn(t *testing.T, clk *fakeclock.Clock, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	opts = append([]Option{WithClock(clk), WithHeadroom(0), WithRules(Rule{
		Name: "one", Limit: Limit{Rate: 1, Period: time.Second, Burst: 1},
	})}, opts...)
	tr := mustNew(t, base, opts...)
	if err := roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); err != nil {
		t.Fatal(err)
	}
	return tr
}

// retryTransport is a Transport with one rule of 1000/s, burst 10, and opts.
func retryTransport(t *testing.T, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	opts = append([]Option{WithRules(Rule{Name: "r", Limit: Limit{Rate: 1000, Period: time.Second, Burst: 10}})}, opts...)
	tr, err := New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
