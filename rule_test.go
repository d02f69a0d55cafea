package throttle_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
)

func TestRuleValidation(t *testing.T) {
	ok := throttle.Rule{Name: "ok", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 1}}
	with := func(f func(r *throttle.Rule)) throttle.Rule { r := ok; r.Name = "bad"; f(&r); return r }
	tests := []struct {
		name      string
		opts      []throttle.Option
		wantRule  string
		wantField string
	}{
		{"zero rate", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Rate = 0 }))}, "bad", "Limit.Rate"},
		{"negative rate", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Rate = -1 }))}, "bad", "Limit.Rate"},
		{"zero period", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Period = 0 }))}, "bad", "Limit.Period"},
		{"negative period", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Period = -time.Second }))}, "bad", "Limit.Period"},
		{"zero burst", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Burst = 0 }))}, "bad", "Limit.Burst"},
		{"negative burst", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Burst = -5 }))}, "bad", "Limit.Burst"},
		{"zero limit", []throttle.Option{throttle.WithRules(throttle.Rule{Name: "bad"})}, "bad", "Limit.Rate"},
		{"empty name, named by index", []throttle.Option{throttle.WithRules(ok, with(func(r *throttle.Rule) { r.Name = "" }))}, "#1", "Name"},
		{"duplicate name", []throttle.Option{throttle.WithRules(ok, ok)}, "ok", "Name"},
		{"duplicate name across WithRules", []throttle.Option{throttle.WithRules(ok), throttle.WithRules(ok)}, "ok", "Name"},
		{"bad path pattern", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Match.Path = "/v1/[" }))}, "bad", "Match.Path"},
		{"rate over one per ns", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Rate, r.Limit.Period = 2, time.Nanosecond }))}, "bad", "Limit.Rate"},
		{"huge rate", []throttle.Option{throttle.WithRules(with(func(r *throttle.Rule) { r.Limit.Rate = math.MaxInt }))}, "bad", "Limit.Rate"},
		// An invalid WithHeadroom names no rule: it is an *OptionError naming the option.
		{"headroom below 0", []throttle.Option{throttle.WithHeadroom(-0.01), throttle.WithRules(ok)}, "", "WithHeadroom"},
		{"headroom above 0.5", []throttle.Option{throttle.WithHeadroom(0.6), throttle.WithRules(ok)}, "", "WithHeadroom"},
		{"headroom NaN", []throttle.Option{throttle.WithHeadroom(math.NaN()), throttle.WithRules(ok)}, "", "WithHeadroom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := throttle.New(okBase, tt.opts...)
			if tt.wantRule == "" {
				var oe *throttle.OptionError
				if !errors.As(err, &oe) || !errors.Is(err, throttle.ErrInvalidOption) || oe.Option != tt.wantField {
					t.Fatalf("New: err %v (%T), want an *OptionError naming %s", err, err, tt.wantField)
				}
			} else {
				var re *throttle.RuleError
				if !errors.As(err, &re) {
					t.Fatalf("New: err %v (%T), want a *RuleError", err, err)
				}
				if !errors.Is(err, throttle.ErrInvalidRule) {
					t.Fatalf("err %v does not match ErrInvalidRule", err)
				}
				if re.Field != tt.wantField || re.Rule != tt.wantRule {
					t.Fatalf("RuleError names rule %q field %q, want rule %q field %q", re.Rule, re.Field, tt.wantRule, tt.wantField)
				}
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Fatalf("message %q does not name the field", err)
			}

			// NewTransport reports the same error from every RoundTrip.
			called := false
			tr := throttle.NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
				called = true
				return okBase(r)
			}), tt.opts...)
			if tr.Err() == nil || tr.Err().Error() != err.Error() {
				t.Fatalf("Err() = %v, want %v", tr.Err(), err)
			}
			for range 2 {
				body := newRecBody()
				req := newReq(t, context.Background(), "POST", "http://x/")
				req.Body = body
				resp, rtErr := tr.RoundTrip(req)
				if resp != nil || rtErr != tr.Err() {
					t.Fatalf("RoundTrip = %v, %v; want nil, the configuration error", resp, rtErr)
				}
				if body.Closes() != 1 {
					t.Fatalf("body closed %d times, want 1", body.Closes())
				}
			}
			if called {
				t.Fatal("base called despite the configuration error")
			}
		})
	}
	t.Run("valid rules and no rules are accepted", func(t *testing.T) {
		for _, opts := range [][]throttle.Option{nil, {throttle.WithRules(ok)}, {throttle.WithHeadroom(0), throttle.WithRules(ok, with(func(*throttle.Rule) {}))},
			{throttle.WithRules(throttle.Rule{Name: "ns", Limit: throttle.Limit{Rate: 1, Period: time.Nanosecond, Burst: 1}}), throttle.WithHeadroom(0)}} {
			if _, err := throttle.New(nil, opts...); err != nil {
				t.Fatalf("New(%d options): %v", len(opts), err)
			}
		}
	})
}

// hourRule allows burst requests per hour: on a fake clock that does not
// move, a request beyond the burst would wait an hour.
func hourRule(name string, burst int) throttle.Rule {
	return throttle.Rule{Name: name, Limit: throttle.Limit{Rate: 1, Period: time.Hour, Burst: burst}}
}
