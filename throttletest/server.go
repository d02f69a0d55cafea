package throttletest

import (
	"net/http/httptest"
)

// Server is a simulated provider on a loopback port, in the manner of
// [httptest.Server]: point a client (or a [throttle.Transport] with the
// provider's preset) at its URL, then read its [Server.Report]. It embeds
// the running *httptest.Server (URL, Client, Close) and the
// [Handler] that answers (Pause, Report).
//
// Create one with [NewServer] and Close it when done. Its methods are safe
// for concurrent use.
type Server struct {
	*httptest.Server
	*Handler
}

// NewServer starts a Server simulating p (see [NewHandler] for the
// options and the errors). The caller must Close it.
func NewServer(p Profile, opts ...Option) (*Server, error) {
	h, err := NewHandler(p, opts...)
	if err != nil {
		return nil, err
	}
	return &Server{Server: httptest.NewServer(h), Handler: h}, nil
}
