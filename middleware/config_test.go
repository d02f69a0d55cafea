package middleware_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// TestInvalidConfig: an invalid rule is a *throttle.RuleError naming the
// rule and the field, an invalid option value a *throttle.OptionError
// naming the option; never a panic.
func TestInvalidConfig(t *testing.T) {
	// A client is made, never dialled: New checks the rules before any call.
	unreachable := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = unreachable.Close() })
	good := throttle.Limit{Rate: 10, Period: time.Second, Burst: 10}
	ruleTests := []struct {
		name        string
		opts        []middleware.Option
		rule, field string
	}{
		{"no name", []middleware.Option{middleware.WithRules(throttle.Rule{Limit: good})}, "#0", "Name"},
		{"duplicate name", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Limit: good}, throttle.Rule{Name: "a", Limit: good})}, "a", "Name"},
		{"zero rate", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Limit: throttle.Limit{Period: time.Second, Burst: 1}})}, "a", "Limit.Rate"},
		{"zero period", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Limit: throttle.Limit{Rate: 1, Burst: 1}})}, "a", "Limit.Period"},
		{"no burst", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Limit: throttle.Limit{Rate: 1, Period: time.Second}})}, "a", "Limit.Burst"},
		{"window with a burst", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Algorithm: throttle.FixedWindow, Limit: good})}, "a", "Limit.Burst"},
		{"negative concurrency", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Concurrency: -1})}, "a", "Concurrency"},
		{"bad path", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "a", Limit: good, Match: throttle.Match{Path: "["}})}, "a", "Match.Path"},
		{"name the headers cannot carry", []middleware.Option{middleware.WithRules(throttle.Rule{Name: "é", Limit: good})}, "é", "Name"},
		{"in a tier", []middleware.Option{middleware.WithTier("pro", throttle.Rule{Name: "p", Limit: throttle.Limit{Rate: -1, Period: time.Second, Burst: 1}})}, "pro/p", "Limit.Rate"},
		{"too fast for Redis", []middleware.Option{middleware.WithRedis(unreachable), middleware.WithRules(throttle.Rule{Name: "a", Limit: throttle.Limit{Rate: 10_000, Period: time.Millisecond, Burst: 1}})}, "a", "Limit.Rate"},
	}
	for _, tt := range ruleTests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := middleware.New(tt.opts...)
			var re *throttle.RuleError
			if !errors.As(err, &re) || !errors.Is(err, throttle.ErrInvalidRule) {
				t.Fatalf("New: %v (%T), want a *throttle.RuleError", err, err)
			}
			if re.Rule != tt.rule || re.Field != tt.field {
				t.Errorf("RuleError %q %q, want rule %q field %q", re.Rule, re.Field, tt.rule, tt.field)
			}
			if l != nil {
				t.Error("a Limiter beside the error")
			}
		})
	}
	optionTests := []struct {
		name, option string
		opt          middleware.Option
	}{
		{"outage mode", "WithOutageMode", middleware.WithOutageMode(throttle.ModeShared)},
		{"fleet share", "WithFleetShare", middleware.WithFleetShare(1.5)},
		{"empty tier", "WithTier", middleware.WithTier("")},
		{"empty namespace", "WithNamespace", middleware.WithNamespace("")},
	}
	for _, tt := range optionTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := middleware.New(tt.opt)
			var oe *throttle.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option || !errors.Is(err, throttle.ErrInvalidOption) {
				t.Errorf("New: %v, want an OptionError of %s", err, tt.option)
			}
		})
	}
}

// TestNoRules: a Limiter without rules admits everything and sends no
// rate-limit header.
func TestNoRules(t *testing.T) {
	l := mustNew(t)
	w := serve(l, nil, get("/"))
	if w.Code != 200 || w.Header().Get("RateLimit-Policy") != "" || w.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	if _, err := l.Take(t.Context(), "", "k", 1); !errors.Is(err, middleware.ErrNoRule) {
		t.Errorf("Take: %v, want ErrNoRule", err)
	}
}
