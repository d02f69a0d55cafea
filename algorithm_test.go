package throttle_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fakeclock"
)

func TestAlgorithmValidation(t *testing.T) {
	rule := func(a throttle.Algorithm, l throttle.Limit) throttle.Rule {
		return throttle.Rule{Name: "r", Algorithm: a, Limit: l}
	}
	hour := throttle.Limit{Rate: 5000, Period: time.Hour}
	for _, tc := range []struct {
		name      string
		rule      throttle.Rule
		wantField string // "" when valid
		wantIn    string
	}{
		{"leaky bucket by default", throttle.Rule{Name: "r", Limit: throttle.Limit{Rate: 2, Period: time.Second, Burst: 40}}, "", ""},
		{"token bucket", rule(throttle.TokenBucket, throttle.Limit{Rate: 2, Period: time.Second, Burst: 40}), "", ""},
		{"fixed window", rule(throttle.FixedWindow, hour), "", ""},
		{"sliding log", rule(throttle.SlidingLog, hour), "", ""},
		{"sliding counter", rule(throttle.SlidingCounter, hour), "", ""},
		{"unknown algorithm", rule(throttle.Algorithm(9), hour), "Algorithm", "Algorithm(9)"},
		{"a burst for a fixed window", rule(throttle.FixedWindow, throttle.Limit{Rate: 5000, Period: time.Hour, Burst: 10}), "Limit.Burst", "means nothing"},
		{"a burst for a sliding log", rule(throttle.SlidingLog, throttle.Limit{Rate: 5000, Period: time.Hour, Burst: 10}), "Limit.Burst", "SlidingLog"},
		{"a burst for a sliding counter", rule(throttle.SlidingCounter, throttle.Limit{Rate: 5000, Period: time.Hour, Burst: 1}), "Limit.Burst", "SlidingCounter"},
		{"no burst for a token bucket", rule(throttle.TokenBucket, throttle.Limit{Rate: 2, Period: time.Second}), "Limit.Burst", ">= 1"},
		{"a window under a microsecond", rule(throttle.FixedWindow, throttle.Limit{Rate: 1, Period: time.Nanosecond}), "Limit.Period", "1µs"},
		{"a window beyond 2^53", rule(throttle.SlidingLog, throttle.Limit{Rate: 10_000_000, Period: 24 * time.Hour}), "Limit.Rate", "2^53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := throttle.New(okBase, throttle.WithRules(tc.rule))
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			var re *throttle.RuleError
			if !errors.As(err, &re) || !errors.Is(err, throttle.ErrInvalidRule) || re.Rule != "r" || re.Field != tc.wantField {
				t.Fatalf("New: err %v (%T), want a *RuleError naming rule r and %s", err, err, tc.wantField)
			}
			if !strings.Contains(re.Reason, tc.wantIn) {
				t.Fatalf("reason %q does not say %q", re.Reason, tc.wantIn)
			}
		})
	}
}

func TestAlgorithmString(t *testing.T) {
	for a, want := range map[throttle.Algorithm]string{
		throttle.LeakyBucket:    "LeakyBucket",
		throttle.TokenBucket:    "TokenBucket",
		throttle.FixedWindow:    "FixedWindow",
		throttle.SlidingLog:     "SlidingLog",
		throttle.SlidingCounter: "SlidingCounter",
		throttle.Algorithm(200): "Algorithm(200)",
	} {
		if got := a.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(a), got, want)
		}
	}
}

// TestAlgorithmRulesShareARequest sends requests matched by rules of
// every algorithm through one Transport: each request is booked in all
// five buckets at once, and the strictest sets the pace. The clock is a
// fake one set mid-hour and nothing waits: a run on the system clock at
// 04:59:51 once saw the fifth request wait 8.8 s for the next hour's
// window and go.
func TestAlgorithmRulesShareARequest(t *testing.T) {
	srv := newServer()
	defer srv.Close()
	rules := []throttle.Rule{
		{Name: "leaky", Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}},
		{Name: "token", Algorithm: throttle.TokenBucket, Limit: throttle.Limit{Rate: 100, Period: time.Second, Burst: 10}},
		{Name: "fixed", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 4, Period: time.Hour}},
		{Name: "log", Algorithm: throttle.SlidingLog, Limit: throttle.Limit{Rate: 100, Period: time.Hour}},
		{Name: "counter", Algorithm: throttle.SlidingCounter, Limit: throttle.Limit{Rate: 100, Period: time.Hour}},
	}
	clk := fakeclock.New(time.Date(2026, 12, 6, 4, 30, 0, 0, time.UTC))
	client := &http.Client{Transport: throttle.NewTransport(http.DefaultTransport,
		throttle.WithRules(rules...), throttle.WithHeadroom(0), throttle.WithClock(clk), throttle.WithoutWaiting())}
	var got []string
	for range 5 {
		got = append(got, get(client, srv.URL, ""))
	}
	if strings.Join(got[:4], ",") != "200 OK,200 OK,200 OK,200 OK" || !strings.Contains(got[4], `rule "fixed"`) {
		t.Fatalf("got %q; want four sent, the fifth refused by the fixed window", got)
	}
}
