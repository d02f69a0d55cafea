package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

// TestFixedWindowLearnsTheServersReset: an hourly FixedWindow rule of 100
// requests (98 after the headroom) meets a server whose window ends 600 s
// from now, not on the hour. From its first answer the rule's windows are
// aligned to that reset: the request after the window's 98 waits the 600 s
// to the server's reset, not the 2,800 s to the next Unix hour; without
// the server's reset, the hour. Both wait the window's edge beyond (1 s,
// its cap: see windowEdge).
func TestFixedWindowLearnsTheServersReset(t *testing.T) {
	start := time.Unix(1_700_000_000, 0) // 800 s past a Unix hour
	for _, tc := range []struct {
		name  string
		reset bool
		want  time.Duration
	}{
		{"reset named", true, 601 * time.Second},
		{"no reset", false, 2801 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(start)
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				h := http.Header{}
				if tc.reset {
					h.Set("X-RateLimit-Limit", "100")
					h.Set("X-RateLimit-Remaining", "50")
					h.Set("X-RateLimit-Reset", strconv.FormatInt(start.Unix()+600, 10))
				}
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			tr := mustNew(t, base, throttle.WithClock(clk), throttle.WithoutWaiting(), throttle.WithRules(throttle.Rule{
				Name: "github-core", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 100, Period: time.Hour},
			}))
			var err error
			sent := 0
			for ; sent < 300; sent++ {
				if err = roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/")); err != nil {
					break
				}
			}
			var we *throttle.WaitError
			if !errors.As(err, &we) {
				t.Fatalf("after %d requests: %v, want a *WaitError", sent, err)
			}
			if we.Wait != tc.want {
				t.Errorf("after %d requests the next waits %v, want %v", sent, we.Wait, tc.want)
			}
		})
	}
}
