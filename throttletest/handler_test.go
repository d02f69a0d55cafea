package throttletest_test

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

// custom is a profile of one rule, answered by the default Answer.
func custom(r throttle.Rule) throttletest.Profile {
	return throttletest.Profile{Name: "custom", Rules: []throttle.Rule{r}}
}

func TestAlgorithms(t *testing.T) {
	// Each rule admits 3 a second; the table gives, for requests at the
	// offsets from t0 (10:00:00.250), which are admitted.
	type arrival struct {
		at    time.Duration
		admit bool
	}
	cases := []struct {
		name     string
		rule     throttle.Rule
		arrivals []arrival
	}{
		{"leaky-bucket", throttle.Rule{Limit: throttle.Limit{Rate: 3, Period: time.Second, Burst: 3}},
			// 3 at once, then one every 333.4 ms.
			[]arrival{{0, true}, {0, true}, {0, true}, {0, false}, {300 * time.Millisecond, false}, {334 * time.Millisecond, true}, {334 * time.Millisecond, false}}},
		{"token-bucket", throttle.Rule{Algorithm: throttle.TokenBucket, Limit: throttle.Limit{Rate: 3, Period: time.Second, Burst: 3}},
			[]arrival{{0, true}, {0, true}, {0, true}, {0, false}, {334 * time.Millisecond, true}}},
		{"fixed-window", throttle.Rule{Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 3, Period: time.Second}},
			// The window is [10:00:00, 10:00:01): it resets 750 ms in.
			[]arrival{{0, true}, {0, true}, {0, true}, {700 * time.Millisecond, false}, {750 * time.Millisecond, true}, {750 * time.Millisecond, true}, {750 * time.Millisecond, true}, {760 * time.Millisecond, false}}},
		{"sliding-log", throttle.Rule{Algorithm: throttle.SlidingLog, Limit: throttle.Limit{Rate: 3, Period: time.Second}},
			[]arrival{{0, true}, {100 * time.Millisecond, true}, {200 * time.Millisecond, true}, {999 * time.Millisecond, false}, {time.Second, true}, {time.Second, false}, {1100 * time.Millisecond, true}}},
		{"sliding-counter", throttle.Rule{Algorithm: throttle.SlidingCounter, Limit: throttle.Limit{Rate: 3, Period: time.Second}},
			// 3 in [10:00:00, 10:00:01); at 10:00:01.5 the estimate is
			// 3·0.5 = 1.5: one more fits (2.5), a second does not (3.5).
			[]arrival{{0, true}, {0, true}, {0, true}, {1250 * time.Millisecond, true}, {1250 * time.Millisecond, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.rule.Name = c.name
			h, fc := newHandler(t, custom(c.rule))
			for i, a := range c.arrivals {
				fc.Set(t0.Add(a.at))
				resp := serve(h, "GET", "/", nil, "")
				if got := resp.StatusCode == http.StatusOK; got != a.admit {
					t.Errorf("request %d at +%v: status %d, want admitted %v", i+1, a.at, resp.StatusCode, a.admit)
				}
			}
		})
	}
}

func TestDecisionWait(t *testing.T) {
	var got throttletest.Decision
	p := custom(throttle.Rule{Name: "r", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 1, Period: time.Minute}})
	p.Answer = func(_ *http.Request, d throttletest.Decision) throttletest.Answer {
		got = d
		return throttletest.Answer{Status: http.StatusTeapot}
	}
	h, _ := newHandler(t, p)
	serve(h, "GET", "/", nil, "")
	resp := serve(h, "GET", "/", nil, "")
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status %d: the profile's Answer was not written", resp.StatusCode)
	}
	q, ok := got.Quota("r")
	if got.Admitted || got.Rule != "r" || got.Wait != 59*time.Second+750*time.Millisecond || !ok || q.Used != 1 || q.Remaining != 0 || q.Size != 1 {
		t.Errorf("decision %+v", got)
	}
}

func TestPause(t *testing.T) {
	h, fc := newHandler(t, throttletest.Shopify(throttletest.ShopifyConfig{}))
	const path = "/admin/api/2024-10/shop.json"
	h.Pause(10 * time.Second)
	resp := serve(h, "GET", path, nil, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10.0" {
		t.Fatalf("paused: status %d, Retry-After %q; want 429, 10.0", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	h.Pause(time.Second) // never shortens the pause
	fc.Advance(9 * time.Second)
	resp = serve(h, "GET", path, nil, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1.0" {
		t.Errorf("9 s in: status %d, Retry-After %q; want 429, 1.0", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	fc.Advance(time.Second)
	if resp := serve(h, "GET", path, nil, ""); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Shopify-Shop-Api-Call-Limit") != "1/40" {
		t.Errorf("after the pause: status %d, call limit %q; want 200, 1/40 (nothing booked during it)", resp.StatusCode, resp.Header.Get("X-Shopify-Shop-Api-Call-Limit"))
	}
	if rep := h.Report(); rep.Refused[throttletest.PauseReason] != 2 || rep.Admitted != 1 {
		t.Errorf("report: refused %v, admitted %d", rep.Refused, rep.Admitted)
	}
	// Each profile answers a pause with a wait the client reads.
	for _, c := range []struct {
		p throttletest.Profile
		d header.Dialect
	}{
		{throttletest.Stripe(throttletest.StripeConfig{}), providers.Stripe},
		{throttletest.Twilio(throttletest.TwilioConfig{}), providers.Twilio},
		{throttletest.GitHub(throttletest.GitHubConfig{}), providers.GitHub},
		{throttletest.OpenAI(throttletest.OpenAIConfig{RPM: 60}), providers.OpenAI},
	} {
		p := c.p
		h, _ := newHandler(t, p)
		h.Pause(1500 * time.Millisecond)
		resp := serve(h, "GET", "/x", nil, "")
		sig := header.Parse(resp.StatusCode, resp.Header, t0, 0, c.d)
		if resp.StatusCode < 400 || !sig.Limited || sig.RetryAfter != 2*time.Second {
			t.Errorf("%s paused: status %d, the client reads %+v; want a refusal with a wait of 2s", p.Name, resp.StatusCode, sig)
		}
	}
}

func TestOutsideConsumer(t *testing.T) {
	// A quota of 10 a second, 4 of which an outside consumer spends.
	p := custom(throttle.Rule{Name: "r", Algorithm: throttle.SlidingLog, Limit: throttle.Limit{Rate: 10, Period: time.Second}})
	h, fc := newHandler(t, p, throttletest.WithOutsideConsumer(4, nil))
	admitted := 0
	for range 100 {
		fc.Advance(50 * time.Millisecond) // 20 a second offered
		if serve(h, "GET", "/", nil, "").StatusCode == http.StatusOK {
			admitted++
		}
	}
	rep := h.Report()
	// 5 seconds: 20 outside requests, all admitted (they come first at
	// their instants when the log has room), and 50 - 20 = 30 of ours.
	if rep.Outside.Admitted+rep.Outside.Refused != 20 {
		t.Errorf("outside requests %+v, want 20 in 5 s", rep.Outside)
	}
	if total := admitted + rep.Outside.Admitted; total > 50 || total < 49 {
		t.Errorf("admitted %d of ours + %d outside, want the quota's 50 in 5 s", admitted, rep.Outside.Admitted)
	}
	if rep.Admitted != admitted || rep.Refused["r"] != 100-admitted {
		t.Errorf("report %d admitted, refused %v; counted %d", rep.Admitted, rep.Refused, admitted)
	}
}

func TestOutsideConsumerRequestShape(t *testing.T) {
	// The outside consumer's requests meet the rules their shape meets:
	// account B's traffic leaves account A's quota alone.
	r, _ := http.NewRequest("GET", "/v1/customers", nil)
	r.Header.Set("Authorization", "Bearer sk_b")
	h, fc := newHandler(t, throttletest.Stripe(throttletest.StripeConfig{Test: true}), throttletest.WithOutsideConsumer(1000, r))
	fc.Advance(time.Second)
	for i := range 25 {
		if resp := serve(h, "GET", "/v1/"+resources[i%8], http.Header{"Authorization": {"Bearer sk_a"}}, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("account A, request %d: status %d", i+1, resp.StatusCode)
		}
	}
	if rep := h.Report(); rep.Outside.Admitted != 25 || rep.Outside.Refused != 975 {
		t.Errorf("outside %+v, want 25 admitted of 1000 (account B's quota)", rep.Outside)
	}
}

func TestServiceTime(t *testing.T) {
	p := custom(throttle.Rule{Name: "cap", Concurrency: 2})
	h, fc := newHandler(t, p, throttletest.WithServiceTime(time.Second))
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- serve(h, "GET", "/", nil, "").StatusCode
		}()
	}
	fc.WaitTimers(2, nil) // both asleep in their service time
	if resp := serve(h, "GET", "/", nil, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third while two are in service: status %d, want 429", resp.StatusCode)
	}
	fc.Advance(time.Second)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("served: status %d", c)
		}
	}
	rep := h.Report()
	if rep.MaxInFlight != 2 || rep.InFlight != 0 || rep.InService != 2*time.Second || rep.Rules["cap"].MaxInFlight != 2 || rep.Refused["cap"] != 1 {
		t.Errorf("report %+v", rep)
	}
}

func TestReport(t *testing.T) {
	p := custom(throttle.Rule{Name: "r", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 2, Period: time.Second},
		Match: throttle.Match{PathPrefix: "/limited"}})
	h, fc := newHandler(t, p)
	for s := range 3 {
		for range 3 {
			serve(h, "GET", "/limited/"+strconv.Itoa(s), nil, "")
		}
		serve(h, "POST", "/free", nil, "")
		fc.Advance(time.Second)
	}
	rep := h.Report()
	if rep.Arrived != 12 || rep.Admitted != 9 || rep.RefusedTotal() != 3 || rep.Refused["r"] != 3 {
		t.Errorf("arrived %d, admitted %d, refused %v", rep.Arrived, rep.Admitted, rep.Refused)
	}
	if len(rep.PerSecond) != 3 {
		t.Fatalf("per second %v, want 3 seconds", rep.PerSecond)
	}
	for i, s := range rep.PerSecond {
		if s != (throttletest.Second{Arrived: 4, Admitted: 3}) {
			t.Errorf("second %d: %+v, want 4 arrived, 3 admitted", i, s)
		}
	}
	if got := rep.AdmittedBetween(1, 3); got != 6 {
		t.Errorf("AdmittedBetween(1, 3) = %d, want 6", got)
	}
	if e := rep.Endpoints["GET /limited/0"]; e != (throttletest.Counts{Admitted: 2, Refused: 1}) {
		t.Errorf("endpoint GET /limited/0: %+v", e)
	}
	if e := rep.Endpoints["POST /free"]; e != (throttletest.Counts{Admitted: 3}) {
		t.Errorf("endpoint POST /free: %+v", e)
	}
	if r := rep.Rules["r"]; r.Admitted != 6 || r.Refused != 3 {
		t.Errorf("rule r: %+v", r)
	}
	if !rep.Start.Equal(t0) || !rep.End.Equal(t0.Add(3*time.Second)) {
		t.Errorf("span %v to %v", rep.Start, rep.End)
	}
	// A report is a copy.
	rep.Refused["r"] = 99
	if h.Report().Refused["r"] != 3 {
		t.Error("changing a report changed the server's")
	}
}

func TestWithRules(t *testing.T) {
	h, _ := newHandler(t, throttletest.Stripe(throttletest.StripeConfig{}),
		throttletest.WithRules(throttle.Rule{Name: "one-refund", Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1},
			Match: throttle.Match{Methods: []string{"POST"}, PathPrefix: "/v1/refunds"}}))
	serve(h, "POST", "/v1/refunds", nil, "")
	resp := serve(h, "POST", "/v1/refunds", nil, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Stripe-Rate-Limited-Reason") != "" {
		t.Errorf("status %d, reason %q: want 429 in Stripe's shape, with no reason Stripe would send", resp.StatusCode, resp.Header.Get("Stripe-Rate-Limited-Reason"))
	}
	if rep := h.Report(); rep.Refused["one-refund"] != 1 {
		t.Errorf("refused %v", rep.Refused)
	}
}

func TestInvalidConfig(t *testing.T) {
	cases := []struct {
		name        string
		profile     throttletest.Profile
		opts        []throttletest.Option
		rule, field string
		option      string
	}{
		{"no-name", custom(throttle.Rule{Concurrency: 1}), nil, "#0", "Name", ""},
		{"duplicate", throttletest.Profile{Rules: []throttle.Rule{{Name: "a", Concurrency: 1}, {Name: "a", Concurrency: 1}}}, nil, "a", "Name", ""},
		{"nothing", custom(throttle.Rule{Name: "a"}), nil, "a", "Limit.Rate", ""},
		{"burst", custom(throttle.Rule{Name: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second}}), nil, "a", "Limit.Burst", ""},
		{"window-burst", custom(throttle.Rule{Name: "a", Algorithm: throttle.FixedWindow, Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}), nil, "a", "Limit.Burst", ""},
		{"period", custom(throttle.Rule{Name: "a", Limit: throttle.Limit{Rate: 1, Burst: 1}}), nil, "a", "Limit.Period", ""},
		{"algorithm", custom(throttle.Rule{Name: "a", Algorithm: 9, Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}), nil, "a", "Algorithm", ""},
		{"concurrency", custom(throttle.Rule{Name: "a", Concurrency: -1}), nil, "a", "Concurrency", ""},
		{"added-rule", throttletest.Stripe(throttletest.StripeConfig{}), []throttletest.Option{throttletest.WithRules(throttle.Rule{Name: throttletest.StripeGlobal, Concurrency: 1})}, throttletest.StripeGlobal, "Name", ""},
		{"service-time", throttletest.Profile{}, []throttletest.Option{throttletest.WithServiceTime(-1)}, "", "", "WithServiceTime"},
		{"outside", throttletest.Profile{}, []throttletest.Option{throttletest.WithOutsideConsumer(0, nil)}, "", "", "WithOutsideConsumer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := throttletest.NewHandler(c.profile, c.opts...)
			if c.option != "" {
				var oe *throttle.OptionError
				if !errors.As(err, &oe) || oe.Option != c.option || !errors.Is(err, throttle.ErrInvalidOption) {
					t.Errorf("error %v, want an OptionError naming %s", err, c.option)
				}
				return
			}
			var re *throttle.RuleError
			if !errors.As(err, &re) || re.Rule != c.rule || re.Field != c.field || !errors.Is(err, throttle.ErrInvalidRule) {
				t.Errorf("error %v, want a RuleError naming %s and %s", err, c.rule, c.field)
			}
			if _, err := throttletest.NewServer(c.profile, c.opts...); err == nil {
				t.Error("NewServer accepted it")
			}
		})
	}
}

func TestZeroProfile(t *testing.T) {
	h, _ := newHandler(t, throttletest.Profile{})
	if resp := serve(h, "GET", "/", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	// A cost no rule can ever admit is refused, with no wait.
	var d throttletest.Decision
	p := custom(throttle.Rule{Name: "r", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 2}, Cost: func(*http.Request) int { return 3 }})
	p.Answer = func(_ *http.Request, x throttletest.Decision) throttletest.Answer {
		d = x
		return throttletest.Answer{}
	}
	h, _ = newHandler(t, p)
	serve(h, "GET", "/", nil, "")
	if d.Admitted || d.Rule != "r" || d.Wait != 0 {
		t.Errorf("decision %+v, want refused by r with no wait", d)
	}
}
