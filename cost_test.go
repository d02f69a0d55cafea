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

// TestActualCostRefundToAQueueIsACredit: a request refunded while another
// waits in the queue leaves a credit, which the next request that would
// queue takes at once; without the refund it would wait its turn.
func TestActualCostRefundToAQueueIsACredit(t *testing.T) {
	clk := fakeclock.New(epoch)
	release := make(chan struct{})
	arrived := make(chan string, 3)
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		arrived <- r.Header.Get("X-Name")
		h := http.Header{}
		if r.Header.Get("X-Name") == "a" {
			<-release
			h.Set("X-Cost", "1") // booked at 5: 4 back
		}
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	rule := throttle.Rule{
		Name:  "points",
		Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 5},
		Cost: func(r *http.Request) int {
			if r.Method == http.MethodPost {
				return 5
			}
			return 1
		},
		ActualCost: func(resp *http.Response) (int, bool) {
			n, err := strconv.Atoi(resp.Header.Get("X-Cost"))
			return n, err == nil
		},
	}
	tr := mustNew(t, base, throttle.WithRules(rule), throttle.WithClock(clk), throttle.WithHeadroom(0))
	send := func(name, method string) chan error {
		done := make(chan error, 1)
		go func() {
			done <- roundTrip(tr, newReq(t, context.Background(), method, "http://x/", "X-Name", name))
		}()
		return done
	}
	a := send("a", http.MethodPost) // leaves at once: the burst
	if got := <-arrived; got != "a" {
		t.Fatalf("first to arrive: %q, want a", got)
	}
	b := send("b", http.MethodPost) // queues 500 ms behind a
	clk.WaitTimers(1)
	close(release)
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	// A GET would queue 600 ms (the bucket's TAT is 1 s ahead); the 4
	// units a gave back leave it at once.
	c := send("c", http.MethodGet)
	select {
	case got := <-arrived:
		if got != "c" {
			t.Fatalf("arrived %q, want c", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("c did not leave on the credit")
	}
	if err := <-c; err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := <-b; err != nil {
		t.Fatal(err)
	}
}
