package throttle

import (
	"io"
	"net/http"
	"sync"
)

// leaseBody is a response body that gives the request's concurrency leases
// back (see [Rule.Concurrency]) when the caller closes it or reads it to
// its end, whichever comes first: the request is in flight at the server
// until its answer has been read, not when RoundTrip returns. It gives
// them back once.
type leaseBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

// leaseWriteBody is a leaseBody whose body is also an io.Writer: the body
// of a 101 Switching Protocols response, which net/http requires to be an
// io.ReadWriteCloser.
type leaseWriteBody struct {
	*leaseBody
	w io.Writer
}

func (b leaseWriteBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// holdLeases wraps resp's body so that release runs when it is closed or
// read to its end. A response without a body releases at once.
func holdLeases(resp *http.Response, release func()) {
	if resp.Body == nil || resp.Body == http.NoBody {
		release()
		return
	}
	b := &leaseBody{ReadCloser: resp.Body, release: release}
	if w, ok := resp.Body.(io.Writer); ok {
		resp.Body = leaseWriteBody{leaseBody: b, w: w}
		return
	}
	resp.Body = b
}

func (b *leaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		// EOF or a broken connection: either way the request no longer
		// occupies the server.
		b.done()
	}
	return n, err
}

func (b *leaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

func (b *leaseBody) done() { b.once.Do(b.release) }
