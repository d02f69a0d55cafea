package providers_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

// okTransport answers every request 200 without a network.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// newReq builds a request; kv holds header name/value pairs.
func newReq(ctx context.Context, method, url, body string, kv ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequestWithContext(ctx, method, url, rd)
	r.RequestURI = ""
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

// matches reports whether rule matches r, as the Transport decides it: a
// copy of the rule allowing one request an hour, through a Transport that
// never waits, passes r once and rejects it the second time only if the
// rule matched.
func matches(t *testing.T, rule throttle.Rule, r *http.Request) bool {
	t.Helper()
	rule.Limit = throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	rule.Algorithm = throttle.LeakyBucket // the burst above is a bucket's
	rule.Cost = nil
	tr, err := throttle.New(okTransport{}, throttle.WithRules(rule), throttle.WithoutWaiting(),
		throttle.WithRetry(throttle.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatalf("rule %q: %v", rule.Name, err)
	}
	for i := range 2 {
		resp, err := tr.RoundTrip(r.Clone(r.Context()))
		if err != nil {
			var we *throttle.WaitError
			if i == 1 && errors.As(err, &we) {
				return true
			}
			t.Fatalf("rule %q: attempt %d: %v", rule.Name, i, err)
		}
		_ = resp.Body.Close()
	}
	return false
}

// matched returns the names of the preset's rules that match r.
func matched(t *testing.T, p providers.Preset, r *http.Request) []string {
	t.Helper()
	var names []string
	for _, rule := range p.Rules {
		if matches(t, rule, r) {
			names = append(names, rule.Name)
		}
	}
	return names
}

func llm() providers.LLMConfig { return providers.LLMConfig{RPM: 500, TPM: 30000} }

func lim(rate int, per time.Duration, burst int) throttle.Limit {
	return throttle.Limit{Rate: rate, Period: per, Burst: burst}
}

// limitCase names the limits some rules of a preset must have.
type limitCase struct {
	name string
	p    providers.Preset
	want map[string]throttle.Limit
}

func checkLimits(t *testing.T, tests []limitCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, want := range tt.want {
				r := tt.p.Rule(name)
				if r == nil {
					t.Errorf("no rule %q", name)
					continue
				}
				if r.Limit != want {
					t.Errorf("%s: Limit = %+v, want %+v", name, r.Limit, want)
				}
			}
		})
	}
}

// matchCase names the rules of a preset that a request must meet, in
// the preset's order.
type matchCase struct {
	name string
	p    providers.Preset
	r    *http.Request
	want []string
}

func checkMatches(t *testing.T, tests []matchCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matched(t, tt.p, tt.r); !slices.Equal(got, tt.want) {
				t.Errorf("matched %v, want %v", got, tt.want)
			}
		})
	}
}

// keyCase says whether two requests share a rule's bucket.
type keyCase struct {
	name string
	p    providers.Preset
	rule string
	a, b *http.Request
	same bool
}

func checkKeys(t *testing.T, tests []keyCase) {
	t.Helper()
	key := func(t *testing.T, p providers.Preset, rule string, r *http.Request) string {
		t.Helper()
		rl := p.Rule(rule)
		if rl == nil {
			t.Fatalf("no rule %q", rule)
		}
		if rl.Key == nil {
			return ""
		}
		return rl.Key(r)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if same := key(t, tt.p, tt.rule, tt.a) == key(t, tt.p, tt.rule, tt.b); same != tt.same {
				t.Errorf("same bucket = %v, want %v", same, tt.same)
			}
		})
	}
}

// costCase is the cost a rule must give a request.
type costCase struct {
	name string
	p    providers.Preset
	rule string
	r    *http.Request
	want int
}

func checkCosts(t *testing.T, tests []costCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := tt.p.Rule(tt.rule)
			if rl == nil || rl.Cost == nil {
				t.Fatalf("rule %q has no Cost", tt.rule)
			}
			got := rl.Cost(tt.r)
			if got != tt.want {
				t.Errorf("cost = %d, want %d", got, tt.want)
			}
			if got > rl.Limit.Burst {
				t.Errorf("cost %d exceeds burst %d: never admissible", got, rl.Limit.Burst)
			}
		})
	}
}

// checkAbsent asserts that p has no rule named rule: an optional rule
// left out without its configuration.
func checkAbsent(t *testing.T, p providers.Preset, rule string) {
	t.Helper()
	if p.Rule(rule) != nil {
		t.Errorf("%s: rule %q present without its configuration", p.Name, rule)
	}
}

// allPresets are every preset with a valid configuration.
func allPresets() []providers.Preset {
	cost := func(*http.Request) int { return 50 }
	return []providers.Preset{
		providers.StripePreset(providers.StripeConfig{}),
		providers.StripePreset(providers.StripeConfig{Test: true}),
		providers.GitHubPreset(providers.GitHubConfig{}),
		providers.TwilioPreset(providers.TwilioConfig{}),
		providers.ShopifyPreset(providers.ShopifyConfig{GraphQLCost: cost}),
		providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyPlus, GraphQLCost: cost}),
		providers.SlackPreset(providers.SlackConfig{}),
		providers.DiscordPreset(providers.DiscordConfig{}),
		providers.OpenAIPreset(llm()),
		providers.AnthropicPreset(llm()),
		providers.SendGridPreset(providers.SendGridConfig{}),
		providers.HubSpotPreset(providers.HubSpotConfig{}),
		providers.SalesforcePreset(providers.SalesforceConfig{}),
	}
}

func TestPresetsValidate(t *testing.T) {
	for _, p := range allPresets() {
		t.Run(p.Name, func(t *testing.T) {
			if _, err := throttle.New(nil, p.Options()...); err != nil {
				t.Fatalf("throttle.New: %v", err)
			}
			for _, r := range p.Rules {
				if !strings.HasPrefix(r.Name, p.Name+"-") {
					t.Errorf("rule %q does not start with %q", r.Name, p.Name+"-")
				}
			}
		})
	}
	t.Run("all presets in one Transport", func(t *testing.T) {
		var opts []throttle.Option
		for _, p := range allPresets() {
			if p.Name == "stripe" && p.Rule("stripe-global").Limit.Rate == 25 {
				p = p.Named("stripe-test")
			}
			if p.Name == "shopify" && p.Rule("shopify-rest").Limit.Rate == 20 {
				p = p.Named("shopify-plus")
			}
			opts = append(opts, p.Options()...)
		}
		if _, err := throttle.New(nil, opts...); err != nil {
			t.Fatalf("throttle.New: %v", err)
		}
	})
	t.Run("two presets of one provider collide without Named", func(t *testing.T) {
		live, test := providers.StripePreset(providers.StripeConfig{}), providers.StripePreset(providers.StripeConfig{Test: true})
		_, err := throttle.New(nil, append(live.Options(), test.Options()...)...)
		var re *throttle.RuleError
		if !errors.As(err, &re) || re.Field != "Name" {
			t.Fatalf("err = %v, want a RuleError on Name", err)
		}
	})
	t.Run("LLM presets need the caller's RPM", func(t *testing.T) {
		for _, p := range []providers.Preset{providers.OpenAIPreset(providers.LLMConfig{}), providers.AnthropicPreset(providers.LLMConfig{})} {
			_, err := throttle.New(nil, p.Options()...)
			var re *throttle.RuleError
			if !errors.As(err, &re) || re.Rule != p.Name+"-requests" || re.Field != "Limit.Rate" {
				t.Errorf("%s: err = %v, want a RuleError on %s-requests Limit.Rate", p.Name, err, p.Name)
			}
		}
	})
}

func TestPresetEditing(t *testing.T) {
	t.Run("Rule edits in place", func(t *testing.T) {
		p := providers.StripePreset(providers.StripeConfig{})
		p.Rule("stripe-global").Limit.Rate = 40
		if got := p.Rules[0].Limit.Rate; got != 40 {
			t.Errorf("Rate = %d, want 40", got)
		}
		if p.Rule("stripe-nope") != nil {
			t.Error("Rule of an unknown name is not nil")
		}
	})
	t.Run("Named renames a copy", func(t *testing.T) {
		p := providers.StripePreset(providers.StripeConfig{Test: true})
		q := p.Named("stripe-sandbox")
		if q.Name != "stripe-sandbox" || q.Rule("stripe-sandbox-global") == nil {
			t.Errorf("Named: name %q, rules %v", q.Name, names(q))
		}
		if p.Rule("stripe-global") == nil {
			t.Error("Named changed the original preset")
		}
	})
	t.Run("Options", func(t *testing.T) {
		if n := len(providers.StripePreset(providers.StripeConfig{}).Options()); n != 2 {
			t.Errorf("Stripe: %d options, want rules and dialect", n)
		}
		if n := len(providers.TwilioPreset(providers.TwilioConfig{}).Options()); n != 2 {
			t.Errorf("Twilio: %d options, want rules and dialect", n)
		}
		if n := len(providers.SlackPreset(providers.SlackConfig{}).Options()); n != 1 {
			t.Errorf("Slack: %d options, want rules only", n)
		}
	})
	t.Run("later edits do not reach the options", func(t *testing.T) {
		p := providers.DiscordPreset(providers.DiscordConfig{})
		opts := p.Options()
		p.Rules[0].Name = ""
		if _, err := throttle.New(nil, opts...); err != nil {
			t.Errorf("throttle.New: %v", err)
		}
	})
}

func names(p providers.Preset) []string {
	var s []string
	for _, r := range p.Rules {
		s = append(s, r.Name)
	}
	return s
}
