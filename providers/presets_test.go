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

// newReq builds a request; hdr holds header name/value pairs.
func newReq(ctx context.Context, method, url, body string, hdr ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequestWithContext(ctx, method, url, rd)
	r.RequestURI = ""
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
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
	rule.Cost = nil
	tr, err := throttle.New(okTransport{}, throttle.WithRules(rule), throttle.WithMaxWait(0),
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

func TestPresetLimits(t *testing.T) {
	lim := func(rate int, per time.Duration, burst int) throttle.Limit {
		return throttle.Limit{Rate: rate, Period: per, Burst: burst}
	}
	s, m, h := time.Second, time.Minute, time.Hour
	cost := func(*http.Request) int { return 1 }
	tests := []struct {
		name string
		p    providers.Preset
		want map[string]throttle.Limit
	}{
		{"stripe live", providers.StripePreset(providers.StripeConfig{}), map[string]throttle.Limit{
			"stripe-global": lim(100, s, 1), "stripe-endpoint": lim(25, s, 1), "stripe-files-read": lim(20, s, 1),
			"stripe-files-write": lim(20, s, 1), "stripe-search": lim(20, s, 1), "stripe-meter-events": lim(1000, s, 10),
		}},
		{"stripe test", providers.StripePreset(providers.StripeConfig{Test: true}), map[string]throttle.Limit{
			"stripe-global": lim(25, s, 1), "stripe-endpoint": lim(25, s, 1),
		}},
		{"github", providers.GitHubPreset(providers.GitHubConfig{}), map[string]throttle.Limit{
			"github-core": lim(5000, h, 50), "github-search": lim(30, m, 1), "github-code-search": lim(10, m, 1),
			"github-unauthenticated": lim(60, h, 1), "github-unauthenticated-search": lim(10, m, 1),
			"github-points": lim(900, m, 9), "github-content-per-minute": lim(80, m, 1), "github-content-per-hour": lim(500, h, 5),
		}},
		{"github enterprise cloud app", providers.GitHubPreset(providers.GitHubConfig{Hourly: 15000}), map[string]throttle.Limit{
			"github-core": lim(15000, h, 150),
		}},
		{"twilio", providers.TwilioPreset(providers.TwilioConfig{}), map[string]throttle.Limit{
			"twilio-requests": lim(30, s, 1), "twilio-long-code": lim(1, s, 1), "twilio-toll-free": lim(3, s, 1), "twilio-short-code": lim(100, s, 1),
		}},
		{"twilio segments and own rate", providers.TwilioPreset(providers.TwilioConfig{Requests: lim(5, s, 2), Segments: cost}), map[string]throttle.Limit{
			"twilio-requests": lim(5, s, 2), "twilio-long-code": lim(1, s, 10), "twilio-short-code": lim(100, s, 10),
		}},
		{"shopify standard", providers.ShopifyPreset(providers.ShopifyConfig{GraphQLCost: cost}), map[string]throttle.Limit{
			"shopify-rest": lim(2, s, 38), "shopify-graphql": lim(100, s, 1000),
		}},
		{"shopify advanced", providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyAdvanced}), map[string]throttle.Limit{
			"shopify-rest": lim(4, s, 36),
		}},
		{"shopify plus", providers.ShopifyPreset(providers.ShopifyConfig{Plan: providers.ShopifyPlus, GraphQLCost: cost}), map[string]throttle.Limit{
			"shopify-rest": lim(20, s, 60), "shopify-graphql": lim(1000, s, 10000),
		}},
		{"slack", providers.SlackPreset(providers.SlackConfig{}), map[string]throttle.Limit{
			"slack-tier1": lim(1, m, 1), "slack-tier2": lim(20, m, 1), "slack-tier3": lim(50, m, 1), "slack-tier4": lim(100, m, 1),
			"slack-post-message": lim(1, s, 1),
		}},
		{"discord", providers.DiscordPreset(providers.DiscordConfig{}), map[string]throttle.Limit{"discord-global": lim(50, s, 1)}},
		{"openai", providers.OpenAIPreset(llm()), map[string]throttle.Limit{
			"openai-requests": lim(500, m, 8), "openai-tokens": lim(30000, m, 30000),
		}},
		{"anthropic", providers.AnthropicPreset(providers.LLMConfig{RPM: 50}), map[string]throttle.Limit{
			"anthropic-requests": lim(50, m, 1),
		}},
	}
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
	t.Run("optional rules absent", func(t *testing.T) {
		for _, c := range []struct {
			p    providers.Preset
			rule string
		}{
			{providers.ShopifyPreset(providers.ShopifyConfig{}), "shopify-graphql"},
			{providers.OpenAIPreset(providers.LLMConfig{RPM: 3}), "openai-tokens"},
			{providers.AnthropicPreset(providers.LLMConfig{RPM: 3}), "anthropic-input-tokens"},
		} {
			if c.p.Rule(c.rule) != nil {
				t.Errorf("%s: rule %q present without its configuration", c.p.Name, c.rule)
			}
		}
	})
}

func TestPresetMatches(t *testing.T) {
	ctx := context.Background()
	auth := []string{"Authorization", "Bearer secret"}
	twilioMsg := "https://api.twilio.com/2010-04-01/Accounts/AC123/Messages.json"
	sender := func(from string) context.Context { return providers.WithTwilioSender(ctx, from) }
	stripe := providers.StripePreset(providers.StripeConfig{})
	github := providers.GitHubPreset(providers.GitHubConfig{})
	twilio := providers.TwilioPreset(providers.TwilioConfig{})
	gql := func(*http.Request) int { return 10 }
	shopify := providers.ShopifyPreset(providers.ShopifyConfig{GraphQLCost: gql})
	slack := providers.SlackPreset(providers.SlackConfig{Methods: map[string]providers.SlackTier{"users.info": providers.SlackTier4}})
	discord := providers.DiscordPreset(providers.DiscordConfig{})
	openai := providers.OpenAIPreset(llm())
	anthropic := providers.AnthropicPreset(llm())
	tests := []struct {
		name string
		p    providers.Preset
		r    *http.Request
		want []string
	}{
		{"stripe create customer", stripe, newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "name=x"), []string{"stripe-global", "stripe-endpoint"}},
		{"stripe host with port", stripe, newReq(ctx, "GET", "https://api.stripe.com:443/v1/charges", ""), []string{"stripe-global", "stripe-endpoint"}},
		{"stripe search", stripe, newReq(ctx, "GET", "https://api.stripe.com/v1/customers/search?query=x", ""), []string{"stripe-global", "stripe-endpoint", "stripe-search"}},
		{"stripe file upload", stripe, newReq(ctx, "POST", "https://files.stripe.com/v1/files", "f"), []string{"stripe-global", "stripe-endpoint", "stripe-files-write"}},
		{"stripe file read", stripe, newReq(ctx, "GET", "https://api.stripe.com/v1/files/file_1Mr4", ""), []string{"stripe-global", "stripe-endpoint", "stripe-files-read"}},
		{"stripe meter event", stripe, newReq(ctx, "POST", "https://api.stripe.com/v1/billing/meter_events", "e"), []string{"stripe-meter-events"}},
		{"stripe v2 meter event stream", stripe, newReq(ctx, "POST", "https://meter-events.stripe.com/v2/billing/meter_event_stream", "e"), []string{"stripe-meter-events"}},
		{"stripe other host", stripe, newReq(ctx, "GET", "https://api.github.com/v1/customers", ""), nil},
		{"github read", github, newReq(ctx, "GET", "https://api.github.com/repos/o/r", "", auth...), []string{"github-core", "github-points"}},
		{"github create issue", github, newReq(ctx, "POST", "https://api.github.com/repos/o/r/issues", "{}", auth...),
			[]string{"github-core", "github-points", "github-content-per-minute", "github-content-per-hour"}},
		{"github update issue", github, newReq(ctx, "PATCH", "https://api.github.com/repos/o/r/issues/1", "{}", auth...), []string{"github-core", "github-points"}},
		{"github search", github, newReq(ctx, "GET", "https://api.github.com/search/issues?q=x", "", auth...), []string{"github-search", "github-points"}},
		{"github code search", github, newReq(ctx, "GET", "https://api.github.com/search/code?q=x", "", auth...), []string{"github-code-search", "github-points"}},
		{"github unauthenticated", github, newReq(ctx, "GET", "https://api.github.com/repos/o/r", ""), []string{"github-unauthenticated", "github-points"}},
		{"github unauthenticated search", github, newReq(ctx, "GET", "https://api.github.com/search/repositories?q=x", ""), []string{"github-unauthenticated-search", "github-points"}},
		{"github graphql", github, newReq(ctx, "POST", "https://api.github.com/graphql", "{}", auth...), nil},
		{"twilio long code", twilio, newReq(sender("+14155550100"), "POST", twilioMsg, "From=x"), []string{"twilio-requests", "twilio-long-code"}},
		{"twilio toll-free", twilio, newReq(sender("+18005550100"), "POST", twilioMsg, "From=x"), []string{"twilio-requests", "twilio-toll-free"}},
		{"twilio short code", twilio, newReq(sender("12345"), "POST", twilioMsg, "From=x"), []string{"twilio-requests", "twilio-short-code"}},
		{"twilio UK long code", twilio, newReq(sender("+447700900123"), "POST", twilioMsg, "From=x"), []string{"twilio-requests", "twilio-long-code"}},
		{"twilio whatsapp sender", twilio, newReq(sender("whatsapp:+14155550100"), "POST", twilioMsg, "From=x"), []string{"twilio-requests"}},
		{"twilio alphanumeric sender", twilio, newReq(sender("ACME"), "POST", twilioMsg, "From=x"), []string{"twilio-requests"}},
		{"twilio sender unknown", twilio, newReq(ctx, "POST", twilioMsg, "From=x"), []string{"twilio-requests"}},
		{"twilio list messages", twilio, newReq(sender("+14155550100"), "GET", twilioMsg, ""), []string{"twilio-requests"}},
		{"twilio calls", twilio, newReq(ctx, "GET", "https://api.twilio.com/2010-04-01/Accounts/AC123/Calls.json", ""), []string{"twilio-requests"}},
		{"shopify rest", shopify, newReq(ctx, "GET", "https://shop1.myshopify.com/admin/api/2024-10/products.json", ""), []string{"shopify-rest"}},
		{"shopify graphql", shopify, newReq(ctx, "POST", "https://shop1.myshopify.com/admin/api/2024-10/graphql.json", "{}"), []string{"shopify-graphql"}},
		{"shopify storefront", shopify, newReq(ctx, "GET", "https://shop1.myshopify.com/products.json", ""), nil},
		{"slack tier 3 known", slack, newReq(ctx, "POST", "https://slack.com/api/conversations.history", "c"), []string{"slack-tier3"}},
		{"slack tier from config", slack, newReq(ctx, "GET", "https://slack.com/api/users.info?user=U1", ""), []string{"slack-tier4"}},
		{"slack default tier", slack, newReq(ctx, "GET", "https://slack.com/api/users.list", ""), []string{"slack-tier2"}},
		{"slack post message", slack, newReq(ctx, "POST", "https://slack.com/api/chat.postMessage", "c"), []string{"slack-post-message"}},
		{"discord", discord, newReq(ctx, "POST", "https://discord.com/api/v10/channels/1/messages", "{}"), []string{"discord-global"}},
		{"discord interaction", discord, newReq(ctx, "POST", "https://discord.com/api/v10/interactions/1/tok/callback", "{}"), nil},
		{"openai", openai, newReq(ctx, "POST", "https://api.openai.com/v1/chat/completions", "{}"), []string{"openai-requests", "openai-tokens"}},
		{"anthropic", anthropic, newReq(ctx, "POST", "https://api.anthropic.com/v1/messages", "{}"), []string{"anthropic-requests", "anthropic-input-tokens"}},
		{"anthropic other host", anthropic, newReq(ctx, "POST", "https://api.openai.com/v1/messages", "{}"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matched(t, tt.p, tt.r); !slices.Equal(got, tt.want) {
				t.Errorf("matched %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("host override", func(t *testing.T) {
		p := providers.StripePreset(providers.StripeConfig{Hosts: []string{"127.0.0.1:8080"}})
		if got := matched(t, p, newReq(ctx, "POST", "http://127.0.0.1:8080/v1/customers", "x")); len(got) != 2 {
			t.Errorf("fake host: matched %v, want global and endpoint", got)
		}
		if got := matched(t, p, newReq(ctx, "POST", "http://127.0.0.1:9090/v1/customers", "x")); got != nil {
			t.Errorf("other port: matched %v, want none", got)
		}
	})
}

func TestStripeEndpoint(t *testing.T) {
	tests := []struct{ method, path, want string }{
		{"POST", "/v1/customers", "POST /v1/customers"},
		{"POST", "/v1/customers/cus_123", "POST /v1/customers/{id}"},
		{"GET", "/v1/customers/cus_NffrFeUfNV2Hib/", "GET /v1/customers/{id}"},
		{"", "/v1/payment_intents/pi_3MtwBwLkdIwHu7ix28a3tqPa/confirm", "GET /v1/payment_intents/{id}/confirm"},
		{"DELETE", "/v1/customers/cus_1/tax_ids/txi_2", "DELETE /v1/customers/{id}/tax_ids/{id}"},
		{"GET", "/v1/customers/search", "GET /v1/customers/search"},
		{"GET", "/v1/checkout/sessions/cs_test_a1b2", "GET /v1/checkout/sessions/{id}"},
		{"GET", "/v1/country_specs/US", "GET /v1/country_specs/{id}"},
		{"GET", "/v1/products/gold-plan", "GET /v1/products/{id}"},
		{"GET", "/v1/products/premium", "GET /v1/products/premium"}, // documented limit
		{"GET", "/v2/core/events/evt_1", "GET /v2/core/events/{id}"},
		{"GET", "/", "GET "},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := providers.StripeEndpoint(tt.method, tt.path); got != tt.want {
				t.Errorf("StripeEndpoint = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPresetKeys(t *testing.T) {
	ctx := context.Background()
	key := func(p providers.Preset, rule string, r *http.Request) string {
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
	stripe := providers.StripePreset(providers.StripeConfig{})
	perAccount := providers.StripePreset(providers.StripeConfig{Key: throttle.KeyHeader("Authorization")})
	twilio := providers.TwilioPreset(providers.TwilioConfig{})
	slack := providers.SlackPreset(providers.SlackConfig{})
	shopify := providers.ShopifyPreset(providers.ShopifyConfig{})
	msg := func(account, from string) *http.Request {
		return newReq(providers.WithTwilioSender(ctx, from), "POST", "https://api.twilio.com/2010-04-01/Accounts/"+account+"/Messages.json", "x")
	}
	slackReq := func(method, token, channel string) *http.Request {
		return newReq(providers.WithSlackChannel(ctx, channel), "POST", "https://slack.com/api/"+method, "x", "Authorization", "Bearer "+token)
	}
	tests := []struct {
		name string
		p    providers.Preset
		rule string
		a, b *http.Request
		same bool
	}{
		{"stripe endpoint: IDs normalised", stripe, "stripe-endpoint",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_123", "x"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_456", "x"), true},
		{"stripe endpoint: method counts", stripe, "stripe-endpoint",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers/cus_123", "x"), newReq(ctx, "GET", "https://api.stripe.com/v1/customers/cus_123", ""), false},
		{"stripe endpoint: paths differ", stripe, "stripe-endpoint",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x"), newReq(ctx, "POST", "https://api.stripe.com/v1/charges", "x"), false},
		{"stripe global: one bucket", stripe, "stripe-global",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/charges", "x", "Authorization", "Bearer sk_b"), true},
		{"stripe global: per account with Key", perAccount, "stripe-global",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_b"), false},
		{"stripe endpoint: per account with Key", perAccount, "stripe-endpoint",
			newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_a"), newReq(ctx, "POST", "https://api.stripe.com/v1/customers", "x", "Authorization", "Bearer sk_b"), false},
		{"twilio requests: per account", twilio, "twilio-requests", msg("AC1", "+14155550100"), msg("AC2", "+14155550100"), false},
		{"twilio requests: same account", twilio, "twilio-requests",
			msg("AC1", "+14155550100"), newReq(ctx, "GET", "https://api.twilio.com/2010-04-01/Accounts/AC1.json", ""), true},
		{"twilio long code: per sender", twilio, "twilio-long-code", msg("AC1", "+14155550100"), msg("AC1", "+14155550101"), false},
		{"slack tier: per method", slack, "slack-tier2", slackReq("users.list", "t1", ""), slackReq("users.lookupByEmail", "t1", ""), false},
		{"slack tier: per workspace token", slack, "slack-tier2", slackReq("users.list", "t1", ""), slackReq("users.list", "t2", ""), false},
		{"slack post: per channel", slack, "slack-post-message", slackReq("chat.postMessage", "t1", "C1"), slackReq("chat.postMessage", "t1", "C2"), false},
		{"slack post: same channel", slack, "slack-post-message", slackReq("chat.postMessage", "t1", "C1"), slackReq("chat.postMessage", "t1", "C1"), true},
		{"shopify: per store", shopify, "shopify-rest",
			newReq(ctx, "GET", "https://a.myshopify.com/admin/api/2024-10/products.json", ""), newReq(ctx, "GET", "https://b.myshopify.com/admin/api/2024-10/products.json", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if same := key(tt.p, tt.rule, tt.a) == key(tt.p, tt.rule, tt.b); same != tt.same {
				t.Errorf("same bucket = %v, want %v", same, tt.same)
			}
		})
	}
}

func TestPresetCosts(t *testing.T) {
	ctx := context.Background()
	github := providers.GitHubPreset(providers.GitHubConfig{})
	segments := providers.TwilioPreset(providers.TwilioConfig{Segments: func(*http.Request) int { return 3 }})
	openai := providers.OpenAIPreset(llm())
	own := providers.AnthropicPreset(providers.LLMConfig{RPM: 50, TPM: 1000, Tokens: func(*http.Request) int { return 77 }})
	tests := []struct {
		name string
		p    providers.Preset
		rule string
		r    *http.Request
		want int
	}{
		{"github GET", github, "github-points", newReq(ctx, "GET", "https://api.github.com/user", ""), 1},
		{"github HEAD", github, "github-points", newReq(ctx, "HEAD", "https://api.github.com/user", ""), 1},
		{"github OPTIONS", github, "github-points", newReq(ctx, "OPTIONS", "https://api.github.com/user", ""), 1},
		{"github POST", github, "github-points", newReq(ctx, "POST", "https://api.github.com/user/repos", "{}"), 5},
		{"github PATCH", github, "github-points", newReq(ctx, "PATCH", "https://api.github.com/user", "{}"), 5},
		{"github PUT", github, "github-points", newReq(ctx, "PUT", "https://api.github.com/user/starred/o/r", ""), 5},
		{"github DELETE", github, "github-points", newReq(ctx, "DELETE", "https://api.github.com/repos/o/r", ""), 5},
		{"twilio segments", segments, "twilio-long-code", newReq(ctx, "POST", "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json", "x"), 3},
		{"openai estimate: body/4", openai, "openai-tokens", newReq(ctx, "POST", "https://api.openai.com/v1/chat/completions", strings.Repeat("a", 400)), 101},
		{"openai estimate: no body", openai, "openai-tokens", newReq(ctx, "GET", "https://api.openai.com/v1/models", ""), 1},
		{"caller's estimate", own, "anthropic-input-tokens", newReq(ctx, "POST", "https://api.anthropic.com/v1/messages", "{}"), 77},
	}
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
	t.Run("a mutating GitHub request is admitted", func(t *testing.T) {
		tr, err := throttle.New(okTransport{}, github.Options()...)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(newReq(ctx, "DELETE", "https://api.github.com/repos/o/r", "", "Authorization", "Bearer x"))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		_ = resp.Body.Close()
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
		if n := len(providers.TwilioPreset(providers.TwilioConfig{}).Options()); n != 1 {
			t.Errorf("Twilio: %d options, want rules only", n)
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
	t.Run("Slack copies its method map", func(t *testing.T) {
		m := map[string]providers.SlackTier{"users.info": providers.SlackTier4}
		p := providers.SlackPreset(providers.SlackConfig{Methods: m})
		m["users.info"] = providers.SlackTier1
		r := newReq(context.Background(), "GET", "https://slack.com/api/users.info", "")
		if got := matched(t, p, r); !slices.Equal(got, []string{"slack-tier4"}) {
			t.Errorf("matched %v, want slack-tier4", got)
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
