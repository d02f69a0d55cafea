package throttle_test

import (
	"io"
	"net/http"
	"time"

	"github.com/throttlekit/throttle"
)

// The helpers shared with package throttle's own tests (helpers_test.go,
// through export_test.go).
type rtFunc = throttle.RTFunc

var (
	okBase     = throttle.OKBase
	newRecBody = throttle.NewRecBody
	newReq     = throttle.NewReq
	mustNew    = throttle.MustNew
	roundTrip  = throttle.RoundTrip
	fillBucket = throttle.FillBucket
)

// epoch is where the fake clocks of these tests start.
var epoch = time.Unix(1_700_000_000, 0)

// drainAndClose reads a little of a response body and closes it.
func drainAndClose(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}
