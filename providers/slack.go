package providers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// SlackTier is a rate-limit tier of Slack's Web API methods. The zero value
// means the default: [SlackTier2] where a tier is expected.
type SlackTier int

// Slack's tiers, each a number of calls per minute per method per
// workspace: 1, 20, 50 and 100 ("1+", "20+", ...: the floors).
const (
	SlackTier1 SlackTier = 1 + iota
	SlackTier2
	SlackTier3
	SlackTier4
)

// slackTierRates are the calls per minute of each tier.
var slackTierRates = [...]int{SlackTier1: 1, SlackTier2: 20, SlackTier3: 50, SlackTier4: 100}

// slackMethodTiers are the tiers the preset knows without being told:
// docs.slack.dev/reference/methods/conversations.history gives Tier 3 for
// Marketplace and internal apps (commercially distributed apps outside the
// Marketplace get 1 call/min since 2025-05-29: set SlackConfig.Methods to
// SlackTier1 for both).
var slackMethodTiers = map[string]SlackTier{
	"conversations.history": SlackTier3,
	"conversations.replies": SlackTier3,
}

// SlackConfig tunes [SlackPreset]. The zero value describes an app calling
// slack.com, one token per workspace, every method at Tier 2 but those the
// preset knows.
type SlackConfig struct {
	// Host is the host the rules match. If empty, slack.com.
	Host string

	// Key identifies the workspace (and app) of a request. If nil, the
	// Authorization header (hashed by the Transport): an app has one bot
	// token per workspace. Tokens sent in the form body are not seen.
	Key func(*http.Request) string

	// Methods gives the tier of the methods you call ("users.info":
	// SlackTier4), from each method's reference page. It is consulted
	// before the few tiers the preset knows.
	Methods map[string]SlackTier

	// DefaultTier is the tier of a method neither Methods nor the preset
	// knows. If 0, Tier 2: the cautious choice, 20 calls/min.
	DefaultTier SlackTier
}

// SlackPreset returns the limits of Slack's Web API
// (api.slack.com/docs/rate-limits, docs.slack.dev/apis/web-api/rate-limits):
//
//   - slack-tier1 … slack-tier4: 1, 20, 50 and 100 calls/min per method per
//     workspace; each request meets the rule of its method's tier (see
//     [SlackConfig.Methods]).
//   - slack-post-message: chat.postMessage, about 1 message/s per channel.
//     The channel is a body field: name it with [WithSlackChannel], else
//     every message of a workspace shares one bucket of 1/s. Slack's
//     workspace-wide limit on top is unpublished.
//
// Slack answers 429 with Retry-After, which the Transport reads without a
// dialect.
func SlackPreset(c SlackConfig) Preset {
	host := c.Host
	if host == "" {
		host = "slack.com"
	}
	key := c.Key
	if key == nil {
		key = throttle.KeyHeader("Authorization")
	}
	def := c.DefaultTier
	if def < SlackTier1 || def > SlackTier4 {
		def = SlackTier2
	}
	// Methods is read at every request: copy it so that later changes to
	// the caller's map neither race nor change the rules.
	methods := make(map[string]SlackTier, len(c.Methods))
	for m, t := range c.Methods {
		methods[m] = t
	}
	tierOf := func(method string) SlackTier {
		if t, ok := methods[method]; ok && t >= SlackTier1 && t <= SlackTier4 {
			return t
		}
		if t, ok := slackMethodTiers[method]; ok {
			return t
		}
		return def
	}
	rules := make([]throttle.Rule, 0, 5)
	for t := SlackTier1; t <= SlackTier4; t++ {
		rate := slackTierRates[t]
		rules = append(rules, throttle.Rule{
			Name:  ruleName("slack", "tier"+string(rune('0'+t))),
			Limit: throttle.Limit{Rate: rate, Period: time.Minute, Burst: burstOf(rate)},
			Match: throttle.Match{Host: host, PathPrefix: "/api/", Func: func(r *http.Request) bool {
				m := slackMethod(r)
				return m != "chat.postMessage" && tierOf(m) == t
			}},
			Key: withKey(key, slackMethod),
		})
	}
	rules = append(rules, throttle.Rule{
		Name:  "slack-post-message",
		Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1},
		Match: throttle.Match{Host: host, Path: "/api/chat.postMessage"},
		Key:   withKey(key, slackChannelFromContext),
	})
	return Preset{Name: "slack", Rules: rules}
}

// slackMethod returns the Web API method of a request: the path after
// /api/.
func slackMethod(r *http.Request) string {
	return strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/"), "/")
}

// slackChannelKey is the context key of WithSlackChannel.
type slackChannelKey struct{}

// WithSlackChannel returns a copy of ctx naming the channel that a
// chat.postMessage request made with it posts to, for [SlackPreset]'s
// per-channel rule.
func WithSlackChannel(ctx context.Context, channel string) context.Context {
	return context.WithValue(ctx, slackChannelKey{}, channel)
}

func slackChannelFromContext(r *http.Request) string {
	s, _ := r.Context().Value(slackChannelKey{}).(string)
	return s
}
