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

// TestActualCostCorrectsTheBooking: a request booked at its estimate of 5
// units whose response says it cost 1 gives 4 back; one that cost 9 is
// charged 4 more. The next request's wait shows it.
func TestActualCostCorrectsTheBooking(t *testing.T) {
	for _, tc := range []struct {
		name     string
		actual   string
		wantWait time.Duration // the next request's wait, in intervals
	}{
		{"refund", "1", 1},
		{"charge", "9", 9},
		{"as estimated", "5", 5},
		{"not said", "", 5},
		{"junk ignored", "lots", 5},
		{"below 1 counts 1", "0", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeclock.New(epoch)
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				h := http.Header{}
				if tc.actual != "" {
					h.Set("X-Cost", tc.actual)
				}
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			rule := throttle.Rule{
				Name:  "points",
				Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 5},
				Cost:  func(*http.Request) int { return 5 },
				ActualCost: func(resp *http.Response) (int, bool) {
					n, err := strconv.Atoi(resp.Header.Get("X-Cost"))
					return n, err == nil
				},
			}
			tr := mustNew(t, base, throttle.WithRules(rule), throttle.WithClock(clk), throttle.WithHeadroom(0), throttle.WithoutWaiting())
			if err := roundTrip(tr, newReq(t, context.Background(), "POST", "http://x/")); err != nil {
				t.Fatal(err)
			}
			err := roundTrip(tr, newReq(t, context.Background(), "POST", "http://x/"))
			var we *throttle.WaitError
			if !errors.As(err, &we) {
				t.Fatalf("second request: %v, want a *WaitError", err)
			}
			if want := tc.wantWait * 100 * time.Millisecond; we.Wait != want {
				t.Errorf("second request waits %v, want %v", we.Wait, want)
			}
		})
	}
}

func TestActualCostOfAWindow(t *testing.T) {
	_, err := throttle.New(nil, throttle.WithRules(throttle.Rule{
		Name: "w", Algorithm: throttle.SlidingLog, Limit: throttle.Limit{Rate: 10, Period: time.Second},
		ActualCost: func(*http.Response) (int, bool) { return 1, true },
	}))
	var re *throttle.RuleError
	if !errors.As(err, &re) || re.Field != "ActualCost" {
		t.Fatalf("err %v, want a *RuleError on ActualCost", err)
	}
}

func TestActualCostNeedsALimit(t *testing.T) {
	_, err := throttle.New(nil, throttle.WithRules(throttle.Rule{Name: "c", Concurrency: 3, ActualCost: func(*http.Response) (int, bool) { return 1, true }}))
	var re *throttle.RuleError
	if !errors.As(err, &re) || re.Field != "ActualCost" {
		t.Fatalf("err %v, want a *RuleError on ActualCost", err)
	}
}
