package providers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/throttlekit/throttle/header"
)

// Twilio reads Twilio's REST API answers. Twilio limits the requests in
// flight per account: every 429 of the REST API is error 20429, too many
// concurrent requests, and names no wait (its body, which a dialect does
// not read, carries the code). Twilio-Concurrent-Requests, which Twilio's
// docs tell callers to watch, is the account's count of requests in flight
// when Twilio answered: the Transport keeps the fleet's concurrency cap in
// line with it. The dialect names itself "twilio" in header.Signal.Dialect
// when it read that count; a 429 without it is Limited and Concurrent all
// the same, but unnamed.
//
// Sources: twilio.com/docs/api/errors/20429 and errors/45780 (read
// 2026-11).
var Twilio header.Dialect = header.DialectFunc(parseTwilio)

// twilioConcurrent is the canonical key of Twilio-Concurrent-Requests.
var twilioConcurrent = http.CanonicalHeaderKey("Twilio-Concurrent-Requests")

// maxTwilioInFlight bounds the count read from Twilio-Concurrent-Requests:
// far above any account's cap, so that a hostile value cannot make the
// cap's arithmetic overflow.
const maxTwilioInFlight = 1 << 20

func parseTwilio(status int, h http.Header, _ time.Time, s *header.Signal) {
	if status == http.StatusTooManyRequests {
		s.Limited = true
		s.Concurrent = true
	}
	if v := value(h, twilioConcurrent); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			s.InFlight, s.HasInFlight = min(n, maxTwilioInFlight), true
			s.Dialect = twilioName
		}
	}
}
