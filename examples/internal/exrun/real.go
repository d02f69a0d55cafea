package exrun

import (
	"net/http"
	"slices"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/examples/internal/exredis"
)

// Real is the throttled side of an example's -real run against a
// provider's API: a Transport over http.DefaultTransport whose buckets
// live in the store, what the API saw counted under it (so that retries
// count too), and the waits for a slot.
type Real struct {
	Transport *throttle.Transport
	Counted   *Counting
	Meter     *Meter
	// StoreDesc describes the store, for printing (exredis.Store.Desc).
	StoreDesc string
	close     func()
}

// OpenReal opens the store at redisURL (the embedded miniredis when empty)
// and builds the Transport with opts (a preset's), the store's options
// under namespace and the Meter. Close it when done.
func OpenReal(redisURL, namespace string, opts ...throttle.Option) (*Real, error) {
	store, err := exredis.Open(redisURL)
	if err != nil {
		return nil, err
	}
	rdb := store.Client()
	r := &Real{Counted: &Counting{Base: http.DefaultTransport}, Meter: &Meter{}, StoreDesc: store.Desc}
	r.Transport, err = throttle.New(r.Counted, slices.Concat(opts, store.Options(rdb, namespace),
		[]throttle.Option{throttle.WithObserver(r.Meter)})...)
	r.close = func() {
		if r.Transport != nil {
			_ = r.Transport.Close()
		}
		_ = rdb.Close()
		store.Close()
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// Close stops the Transport's background work, then closes the Redis
// client and the store.
func (r *Real) Close() { r.close() }
