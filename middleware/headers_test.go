package middleware_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// field is one member of a parsed RateLimit or RateLimit-Policy field.
type field struct {
	name   string
	params map[string]int64
}

// parseList parses a draft-10 field with httpsfv: a List of String items
// with Integer parameters.
func parseList(t *testing.T, v string) []field {
	t.Helper()
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		t.Fatalf("httpsfv: %q: %v", v, err)
	}
	var out []field
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%q: member %T, want an Item", v, m)
		}
		name, ok := it.Value.(string)
		if !ok {
			t.Fatalf("%q: item %T, want a String", v, it.Value)
		}
		f := field{name: name, params: map[string]int64{}}
		for _, k := range it.Params.Names() {
			p, _ := it.Params.Get(k)
			n, ok := p.(int64)
			if !ok {
				t.Fatalf("%q: parameter %s is %T, want an Integer", v, k, p)
			}
			f.params[k] = n
		}
		out = append(out, f)
	}
	return out
}

func TestHeaders(t *testing.T) {
	minute := throttle.Rule{Name: "default", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 100}}
	second := throttle.Rule{Name: "burst", Limit: throttle.Limit{Rate: 5, Period: time.Second, Burst: 5}}
	tests := []struct {
		name     string
		rules    []throttle.Rule
		before   int // requests sent before the one checked
		advance  time.Duration
		status   int
		want     map[string]string // headers; "" means absent
		policy   []field
		state    []field
		bodyType string
	}{
		{
			name: "first request", rules: []throttle.Rule{minute}, status: 200,
			want: map[string]string{
				"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "99", "X-RateLimit-Reset": "1",
				"Retry-After": "",
			},
			policy: []field{{"default", map[string]int64{"q": 100, "w": 60}}},
			state:  []field{{"default", map[string]int64{"r": 99, "t": 1}}},
		},
		{
			name: "half spent", rules: []throttle.Rule{minute}, before: 49, status: 200,
			want:   map[string]string{"X-RateLimit-Remaining": "50", "X-RateLimit-Reset": "30"},
			policy: []field{{"default", map[string]int64{"q": 100, "w": 60}}},
			state:  []field{{"default", map[string]int64{"r": 50, "t": 30}}},
		},
		{
			name: "over the limit", rules: []throttle.Rule{minute}, before: 100, status: 429,
			want: map[string]string{
				"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "60",
				"Retry-After": "1", "Content-Type": "application/json",
			},
			policy:   []field{{"default", map[string]int64{"q": 100, "w": 60}}},
			state:    []field{{"default", map[string]int64{"r": 0, "t": 60}}},
			bodyType: "rate_limited",
		},
		{
			name: "refilled", rules: []throttle.Rule{minute}, before: 100, advance: 30 * time.Second, status: 200,
			want:  map[string]string{"X-RateLimit-Remaining": "49", "X-RateLimit-Reset": "31"},
			state: []field{{"default", map[string]int64{"r": 49, "t": 31}}},
		},
		{
			name: "two rules, the tighter decides and comes first", rules: []throttle.Rule{minute, second}, before: 4, status: 200,
			want: map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"},
			policy: []field{
				{"burst", map[string]int64{"q": 5, "w": 1}},
				{"default", map[string]int64{"q": 100, "w": 60}},
			},
			state: []field{
				{"burst", map[string]int64{"r": 0, "t": 1}},
				{"default", map[string]int64{"r": 95, "t": 3}},
			},
		},
		{
			name: "refused by the second rule", rules: []throttle.Rule{minute, second}, before: 5, status: 429,
			want: map[string]string{"X-RateLimit-Limit": "5", "Retry-After": "1"},
			policy: []field{
				{"burst", map[string]int64{"q": 5, "w": 1}},
				{"default", map[string]int64{"q": 100, "w": 60}},
			},
			bodyType: "rate_limited",
		},
		{
			name: "a name to escape", rules: []throttle.Rule{{Name: `a "quoted" \ name`, Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 10}}},
			status: 200,
			policy: []field{{`a "quoted" \ name`, map[string]int64{"q": 10, "w": 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			l := mustNew(t, middleware.WithClock(clk), middleware.WithRules(tt.rules...))
			for range tt.before {
				serve(l, nil, get("/"))
			}
			clk.Advance(tt.advance)
			w := serve(l, nil, get("/"))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			for k, v := range tt.want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if tt.policy != nil {
				checkFields(t, "RateLimit-Policy", parseList(t, w.Header().Get("RateLimit-Policy")), tt.policy)
			}
			if tt.state != nil {
				checkFields(t, "RateLimit", parseList(t, w.Header().Get("RateLimit")), tt.state)
			}
			if tt.bodyType != "" {
				var body struct {
					Error struct {
						Type       string `json:"type"`
						Message    string `json:"message"`
						Rule       string `json:"rule"`
						RetryAfter int64  `json:"retry_after"`
					} `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q: %v", w.Body, err)
				}
				if body.Error.Type != tt.bodyType || body.Error.Rule == "" || body.Error.Message == "" || body.Error.RetryAfter < 1 {
					t.Errorf("body %+v", body.Error)
				}
			}
		})
	}
}

func checkFields(t *testing.T, name string, got, want []field) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", name, got, want)
	}
	for i := range want {
		if got[i].name != want[i].name {
			t.Errorf("%s[%d]: %q, want %q", name, i, got[i].name, want[i].name)
		}
		for k, v := range want[i].params {
			if got[i].params[k] != v {
				t.Errorf("%s[%d] %s=%d, want %d (%v)", name, i, k, got[i].params[k], v, got[i].params)
			}
		}
	}
}

// TestHeadersHook: WithHeaders replaces the standard headers with a
// provider's shape, on admitted and refused requests alike, and
// WithRefusal writes the refusal.
func TestHeadersHook(t *testing.T) {
	l := mustNew(t,
		middleware.WithClock(newClock()),
		middleware.WithRules(throttle.Rule{Name: "shop", Limit: throttle.Limit{Rate: 2, Period: time.Second, Burst: 40}}),
		middleware.WithHeaders(func(h http.Header, d middleware.Decision) {
			h.Set("X-Shopify-Shop-Api-Call-Limit", fmtCallLimit(d))
		}),
		middleware.WithRefusal(func(w http.ResponseWriter, r *http.Request, d middleware.Decision) {
			if got, ok := middleware.DecisionFrom(r.Context()); !ok || got.Reason != d.Reason {
				t.Errorf("DecisionFrom in the refusal: %+v, %v", got, ok)
			}
			w.Header().Set("Retry-After", "2.0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`))
		}),
	)
	w := serve(l, nil, get("/"))
	if got := w.Header().Get("X-Shopify-Shop-Api-Call-Limit"); got != "1/40" {
		t.Errorf("call limit %q, want 1/40", got)
	}
	if got := w.Header().Get("X-RateLimit-Limit"); got != "" {
		t.Errorf("standard header sent beside the hook's: %q", got)
	}
	for range 39 {
		serve(l, nil, get("/"))
	}
	w = serve(l, nil, get("/"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "2.0" || w.Header().Get("X-Shopify-Shop-Api-Call-Limit") != "40/40" {
		t.Errorf("refusal: %d %v", w.Code, w.Header())
	}
}

// fmtCallLimit is Shopify's X-Shopify-Shop-Api-Call-Limit: the units in
// the bucket over its size.
func fmtCallLimit(d middleware.Decision) string {
	for _, s := range d.Rules {
		if s.Name == "shop" {
			return strconv.FormatInt(s.Burst-s.Remaining, 10) + "/" + strconv.FormatInt(s.Burst, 10)
		}
	}
	return ""
}
