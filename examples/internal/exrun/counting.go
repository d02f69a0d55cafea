package exrun

import (
	"net/http"
	"sync/atomic"
)

// Counting is an http.RoundTripper that counts what passes through it to
// Base: the requests sent (retries included), and the responses by class.
// Put it under a throttle.Transport to see each attempt, which the caller
// of the Transport does not see when a 429 is retried. It is safe for
// concurrent use.
type Counting struct {
	Base http.RoundTripper

	Sent, OK, Limited, Failed atomic.Int64
}

// RoundTrip sends r through Base and counts the outcome.
func (c *Counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.Sent.Add(1)
	resp, err := c.Base.RoundTrip(r)
	switch {
	case err != nil && r.Context().Err() != nil:
		// Cut short by the caller (the run ended): not the API's doing.
		c.Sent.Add(-1)
	case err != nil:
		c.Failed.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests:
		c.Limited.Add(1)
	case resp.StatusCode < 300:
		c.OK.Add(1)
	default:
		c.Failed.Add(1)
	}
	return resp, err
}

// Counts returns the requests sent, those answered 429 and those answered
// 2xx (Server): what a fleet calling a real API can know of what the API
// saw.
func (c *Counting) Counts() (arrived, limited, admitted int) {
	return int(c.Sent.Load()), int(c.Limited.Load()), int(c.OK.Load())
}
