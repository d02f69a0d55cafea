package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// plans is the tier of each API key in the tier tests.
var plans = map[string]string{"pro-key": "pro"}

func tierLimiter(t *testing.T) *middleware.Limiter {
	key := middleware.APIKey("Authorization")
	return mustNew(t,
		middleware.WithClock(newClock()),
		middleware.WithRules(throttle.Rule{Name: "requests", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 100}, Key: key}),
		middleware.WithTier("pro", throttle.Rule{Name: "requests", Limit: throttle.Limit{Rate: 10_000, Period: time.Minute, Burst: 10_000}, Key: key}),
		middleware.WithTierFunc(func(r *http.Request) string { return plans[key(r)] }),
	)
}

func TestTiers(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		n        int
		admitted int
		tier     string
		limit    string
	}{
		{"free: 100 a minute", "free-key", 150, 100, "", "100"},
		{"pro: 10 000 a minute", "pro-key", 10_050, 10_000, "pro", "10000"},
		{"no key: the free tier", "", 101, 100, "", "100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tierLimiter(t)
			var last *http.Response
			admitted := 0
			var tier string
			h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				d, _ := middleware.DecisionFrom(r.Context())
				tier = d.Tier
			})
			for range tt.n {
				w := serve(l, h, get("/", "Authorization", "Bearer "+tt.key))
				if w.Code == 200 {
					admitted++
				}
				last = w.Result()
			}
			if admitted != tt.admitted {
				t.Errorf("admitted %d of %d, want %d", admitted, tt.n, tt.admitted)
			}
			if tier != tt.tier {
				t.Errorf("tier %q, want %q", tier, tt.tier)
			}
			if got := last.Header.Get("X-RateLimit-Limit"); got != tt.limit {
				t.Errorf("X-RateLimit-Limit %q, want %q", got, tt.limit)
			}
		})
	}
}

// TestTiersApart: a tier's bucket of a rule name is not the default tier's.
func TestTiersApart(t *testing.T) {
	l := tierLimiter(t)
	ctx := context.Background()
	if _, err := l.Take(ctx, "pro", "pro-key", 10_000); err != nil {
		t.Fatal(err)
	}
	if w := serve(l, nil, get("/", "Authorization", "Bearer pro-key")); w.Code != 429 {
		t.Errorf("pro after its quota was taken: %d, want 429", w.Code)
	}
	d, err := l.Take(ctx, "", "pro-key", 1)
	if err != nil || !d.Allowed {
		t.Errorf("the default tier's bucket of the same key: %+v, %v; want it untouched", d, err)
	}
	if _, err := l.Take(ctx, "gold", "k", 1); !errors.Is(err, middleware.ErrUnknownTier) {
		t.Errorf("Take of an unknown tier: %v, want ErrUnknownTier", err)
	}
}

// TestSeveralRulesAtomic: a request checked against several rules is
// booked in all or none: refused by one, it spends nothing in the others.
func TestSeveralRulesAtomic(t *testing.T) {
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(
		throttle.Rule{Name: "account", Limit: throttle.Limit{Rate: 10, Period: time.Minute, Burst: 10}, Key: middleware.KeyHeader("X-Account")},
		throttle.Rule{Name: "writes", Limit: throttle.Limit{Rate: 2, Period: time.Minute, Burst: 2}, Key: middleware.KeyHeader("X-Account"),
			Match: throttle.Match{Methods: []string{http.MethodPost}}},
	))
	post := func() *http.Request { r := get("/", "X-Account", "a"); r.Method = http.MethodPost; return r }
	if got := statuses(l, 5, post); count(got, 200) != 2 {
		t.Fatalf("posts %v, want 2 admitted", got)
	}
	// The 3 refused posts took nothing from the account's 10: 8 are left.
	if got := statuses(l, 9, func() *http.Request { return get("/", "X-Account", "a") }); count(got, 200) != 8 {
		t.Errorf("gets %v, want 8 admitted", got)
	}
}

// TestCost: Rule.Cost weighs a request; Take weighs cost.
func TestCost(t *testing.T) {
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(throttle.Rule{
		Name: "points", Limit: throttle.Limit{Rate: 10, Period: time.Minute, Burst: 10},
		Cost: func(r *http.Request) int {
			if r.URL.Path == "/heavy" {
				return 4
			}
			return 1
		},
	}))
	if got := statuses(l, 3, func() *http.Request { return get("/heavy") }); count(got, 200) != 2 {
		t.Errorf("heavy %v, want 2 admitted (8 of 10)", got)
	}
	d, err := l.Take(context.Background(), "", "", 2)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Errorf("Take 2: %+v, %v; want admitted with 0 left", d, err)
	}
	d, err = l.Take(context.Background(), "", "", 11)
	var re *throttle.RuleError
	if !errors.As(err, &re) || re.Rule != "points" || re.Field != "Cost" || d.Allowed {
		t.Errorf("Take above the burst: %+v, %v; want a RuleError", d, err)
	}
}
