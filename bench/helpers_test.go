package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
)

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newReq returns a request for url with the given headers ("K", "V", ...).
func newReq(b testing.TB, ctx context.Context, method, url string, kv ...string) *http.Request {
	b.Helper()
	r, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// mustNew builds a Transport or fails the benchmark (New ignores nil
// options, so a table's "no option" case can be nil).
func mustNew(b testing.TB, base http.RoundTripper, opts ...throttle.Option) *throttle.Transport {
	b.Helper()
	tr, err := throttle.New(base, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// systemClock is the wall clock, for the local store.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
