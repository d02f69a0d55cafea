package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// DiscordConfig tunes [DiscordPreset]. The zero value describes bots
// calling discord.com.
type DiscordConfig struct {
	// Host is the host the rules match. If empty, discord.com.
	Host string

	// Key identifies the bot of a request. If nil, the Authorization header
	// ("Bot <token>", hashed by the Transport).
	Key func(*http.Request) string
}

// DiscordPreset returns Discord's global limit
// (discord-api-docs docs/topics/rate-limits.md):
//
//   - discord-global: 50 requests/s per bot (per IP address without a
//     token), burst 1, for every request under /api/ except interaction
//     endpoints (paths with /interactions/), which are exempt.
//
// Discord's per-route limits are not published numbers ("don't hard-code
// limits"): the dialect [Discord] reads them from the headers, so the
// fleet pauses when a route's bucket is empty.
func DiscordPreset(c DiscordConfig) Preset {
	host := c.Host
	if host == "" {
		host = "discord.com"
	}
	key := c.Key
	if key == nil {
		key = throttle.KeyHeader("Authorization")
	}
	return Preset{
		Name: discordName,
		Rules: []throttle.Rule{{
			Name:  "discord-global",
			Limit: throttle.Limit{Rate: 50, Period: time.Second, Burst: burstOf(50)},
			Match: throttle.Match{Host: host, PathPrefix: "/api/", Func: func(r *http.Request) bool {
				return !strings.Contains(r.URL.Path, "/interactions/")
			}},
			Key: key,
		}},
		Dialect: Discord,
	}
}

// Discord reads Discord's rate-limit headers beyond the standard ones:
// X-RateLimit-Bucket into Bucket, X-RateLimit-Scope ("user", "global",
// "shared") into Scope, and X-RateLimit-Global: true into Scope "global"
// when no scope was sent. header.Parse already reads X-RateLimit-Limit,
// -Remaining, and -Reset-After (float seconds, preferred over the epoch
// -Reset "1470173023.123") into the quota "requests". It names itself
// "discord" in header.Signal.Dialect when it read a bucket, a scope or the
// global flag: the standard X-RateLimit-* fields that other providers send
// are not Discord's.
//
// Source: discord.com/developers/docs/topics/rate-limits.
var Discord header.Dialect = header.DialectFunc(parseDiscord)

// Canonical keys of the fields the Discord dialect reads.
var (
	discordBucket = http.CanonicalHeaderKey("X-RateLimit-Bucket")
	discordScope  = http.CanonicalHeaderKey("X-RateLimit-Scope")
	discordGlobal = http.CanonicalHeaderKey("X-RateLimit-Global")
)

func parseDiscord(_ int, h http.Header, _ time.Time, s *header.Signal) {
	if b := value(h, discordBucket); b != "" {
		s.Bucket = b
		s.Dialect = discordName
	}
	if sc := value(h, discordScope); sc != "" {
		s.Scope = sc
		s.Dialect = discordName
	} else if strings.EqualFold(value(h, discordGlobal), "true") {
		s.Scope = "global"
		s.Dialect = discordName
	}
}
