package providers_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

func TestSlackPreset(t *testing.T) {
	ctx := context.Background()
	s, m := time.Second, time.Minute
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"slack", providers.SlackPreset(providers.SlackConfig{}), map[string]throttle.Limit{
				"slack-tier1": lim(1, m, 1), "slack-tier2": lim(20, m, 1), "slack-tier3": lim(50, m, 1), "slack-tier4": lim(100, m, 1),
				"slack-post-message": lim(1, s, 1),
			}},
		})
	})
	t.Run("matches", func(t *testing.T) {
		slack := providers.SlackPreset(providers.SlackConfig{Methods: map[string]providers.SlackTier{"users.info": providers.SlackTier4}})
		checkMatches(t, []matchCase{
			{"slack tier 3 known", slack, newReq(ctx, "POST", "https://slack.com/api/conversations.history", "c"), []string{"slack-tier3"}},
			{"slack tier from config", slack, newReq(ctx, "GET", "https://slack.com/api/users.info?user=U1", ""), []string{"slack-tier4"}},
			{"slack default tier", slack, newReq(ctx, "GET", "https://slack.com/api/users.list", ""), []string{"slack-tier2"}},
			{"slack post message", slack, newReq(ctx, "POST", "https://slack.com/api/chat.postMessage", "c"), []string{"slack-post-message"}},
		})
	})
	t.Run("keys", func(t *testing.T) {
		slack := providers.SlackPreset(providers.SlackConfig{})
		slackReq := func(method, token, channel string) *http.Request {
			return newReq(providers.WithSlackChannel(ctx, channel), "POST", "https://slack.com/api/"+method, "x", "Authorization", "Bearer "+token)
		}
		checkKeys(t, []keyCase{
			{"slack tier: per method", slack, "slack-tier2", slackReq("users.list", "t1", ""), slackReq("users.lookupByEmail", "t1", ""), false},
			{"slack tier: per workspace token", slack, "slack-tier2", slackReq("users.list", "t1", ""), slackReq("users.list", "t2", ""), false},
			{"slack post: per channel", slack, "slack-post-message", slackReq("chat.postMessage", "t1", "C1"), slackReq("chat.postMessage", "t1", "C2"), false},
			{"slack post: same channel", slack, "slack-post-message", slackReq("chat.postMessage", "t1", "C1"), slackReq("chat.postMessage", "t1", "C1"), true},
		})
	})
	t.Run("Slack copies its method map", func(t *testing.T) {
		methods := map[string]providers.SlackTier{"users.info": providers.SlackTier4}
		p := providers.SlackPreset(providers.SlackConfig{Methods: methods})
		methods["users.info"] = providers.SlackTier1
		r := newReq(ctx, "GET", "https://slack.com/api/users.info", "")
		if got := matched(t, p, r); !slices.Equal(got, []string{"slack-tier4"}) {
			t.Errorf("matched %v, want slack-tier4", got)
		}
	})
}
