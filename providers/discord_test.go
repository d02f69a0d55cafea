package providers_test

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestDiscordPreset(t *testing.T) {
	ctx := context.Background()
	discord := providers.DiscordPreset(providers.DiscordConfig{})
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"discord", discord, map[string]throttle.Limit{"discord-global": lim(50, time.Second, 1)}},
		})
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"discord", discord, newReq(ctx, "POST", "https://discord.com/api/v10/channels/1/messages", "{}"), []string{"discord-global"}},
			{"discord interaction", discord, newReq(ctx, "POST", "https://discord.com/api/v10/interactions/1/tok/callback", "{}"), nil},
		})
	})
}

func TestDiscordDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "discord 429 shared scope", dialect: providers.Discord, status: 429, now: time.Unix(1470173000, 0),
			h: hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023.123",
				"X-RateLimit-Reset-After", "64.57", "X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Scope", "shared", "Retry-After", "65"),
			want: header.Signal{Limited: true, RetryAfter: 65 * time.Second, HasRetryAfter: true, Scope: "shared", Bucket: "abcd1234", Dialect: "discord",
				Quotas: []header.Quota{q("requests", "requests", 10, 0, 64570*time.Millisecond)}},
		},
		{
			name: "discord global flag", dialect: providers.Discord, status: 429,
			h:    hdr("X-RateLimit-Global", "true", "Retry-After", "1"),
			want: header.Signal{Limited: true, RetryAfter: time.Second, HasRetryAfter: true, Scope: "global", Dialect: "discord"},
		},
		{
			name: "discord epoch reset when no reset-after", dialect: providers.Discord, status: 200, now: time.Unix(1470173000, 0),
			h:    hdr("X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "1470173023.123"),
			want: header.Signal{Quotas: []header.Quota{{Name: "requests", Unit: "requests", Remaining: 4, HasRemaining: true, Reset: 23123 * time.Millisecond, HasReset: true}}},
		},
	})
}
