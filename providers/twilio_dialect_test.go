package providers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestTwilioDialect(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name        string
		status      int
		inFlight    string
		limited     bool
		concurrent  bool
		hasInFlight bool
		want        int64
	}{
		{"20429 with the count", http.StatusTooManyRequests, "10", true, true, true, 10},
		{"20429 without it", http.StatusTooManyRequests, "", true, true, false, 0},
		{"ok with the count", http.StatusOK, "3", false, false, true, 3},
		{"zero", http.StatusOK, "0", false, false, true, 0},
		{"negative ignored", http.StatusOK, "-4", false, false, false, 0},
		{"junk ignored", http.StatusOK, "ten", false, false, false, 0},
		{"huge capped", http.StatusOK, "99999999999999", false, false, true, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.inFlight != "" {
				h.Set("Twilio-Concurrent-Requests", tc.inFlight)
			}
			s := header.Parse(tc.status, h, now, 0, providers.Twilio)
			if s.Limited != tc.limited || s.Concurrent != tc.concurrent || s.HasInFlight != tc.hasInFlight || s.InFlight != tc.want {
				t.Errorf("Signal %+v; want limited %v, concurrent %v, in flight %v %d", s, tc.limited, tc.concurrent, tc.hasInFlight, tc.want)
			}
		})
	}
}

func TestStripeConcurrencyReason(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for reason, want := range map[string]bool{
		"global-concurrency": true, "endpoint-concurrency": true, "global-rate": false, "endpoint-rate": false, "resource-specific": false,
	} {
		h := http.Header{"Stripe-Rate-Limited-Reason": {reason}}
		if s := header.Parse(http.StatusTooManyRequests, h, now, 0, providers.Stripe); s.Concurrent != want || !s.Limited {
			t.Errorf("%s: Concurrent %v, Limited %v; want %v, true", reason, s.Concurrent, s.Limited, want)
		}
	}
}

func FuzzTwilio(f *testing.F) {
	f.Add(429, "10")
	f.Add(200, "-1")
	f.Add(200, "1e9")
	f.Fuzz(func(t *testing.T, status int, v string) {
		s := header.Parse(status, http.Header{"Twilio-Concurrent-Requests": {v}}, time.Unix(0, 0), 0, providers.Twilio)
		if s.InFlight < 0 || s.InFlight > 1<<20 || (!s.HasInFlight && s.InFlight != 0) {
			t.Fatalf("InFlight %d (has %v) from %q", s.InFlight, s.HasInFlight, v)
		}
	})
}
