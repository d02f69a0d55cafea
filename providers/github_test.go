package providers_test

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestGitHubPreset(t *testing.T) {
	ctx := context.Background()
	auth := []string{"Authorization", "Bearer secret"}
	github := providers.GitHubPreset(providers.GitHubConfig{})
	m, h := time.Minute, time.Hour
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"github", github, map[string]throttle.Limit{
				"github-core": lim(5000, h, 50), "github-search": lim(30, m, 1), "github-code-search": lim(10, m, 1),
				"github-unauthenticated": lim(60, h, 1), "github-unauthenticated-search": lim(10, m, 1),
				"github-points": lim(900, m, 9), "github-content-per-minute": lim(80, m, 1), "github-content-per-hour": lim(500, h, 5),
			}},
			{"github enterprise cloud app", providers.GitHubPreset(providers.GitHubConfig{Hourly: 15000}), map[string]throttle.Limit{
				"github-core": lim(15000, h, 150),
			}},
		})
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"github read", github, newReq(ctx, "GET", "https://api.github.com/repos/o/r", "", auth...), []string{"github-core", "github-points", "github-concurrency"}},
			{"github create issue", github, newReq(ctx, "POST", "https://api.github.com/repos/o/r/issues", "{}", auth...),
				[]string{"github-core", "github-points", "github-content-per-minute", "github-content-per-hour", "github-concurrency"}},
			{"github update issue", github, newReq(ctx, "PATCH", "https://api.github.com/repos/o/r/issues/1", "{}", auth...), []string{"github-core", "github-points", "github-concurrency"}},
			{"github search", github, newReq(ctx, "GET", "https://api.github.com/search/issues?q=x", "", auth...), []string{"github-search", "github-points", "github-concurrency"}},
			{"github code search", github, newReq(ctx, "GET", "https://api.github.com/search/code?q=x", "", auth...), []string{"github-code-search", "github-points", "github-concurrency"}},
			{"github unauthenticated", github, newReq(ctx, "GET", "https://api.github.com/repos/o/r", ""), []string{"github-unauthenticated", "github-points", "github-concurrency"}},
			{"github unauthenticated search", github, newReq(ctx, "GET", "https://api.github.com/search/repositories?q=x", ""), []string{"github-unauthenticated-search", "github-points", "github-concurrency"}},
			{"github graphql", github, newReq(ctx, "POST", "https://api.github.com/graphql", "{}", auth...), []string{"github-concurrency"}},
		})
	})
	t.Run("costs", func(t *testing.T) {
		checkCosts(t, []costCase{
			{"github GET", github, "github-points", newReq(ctx, "GET", "https://api.github.com/user", ""), 1},
			{"github HEAD", github, "github-points", newReq(ctx, "HEAD", "https://api.github.com/user", ""), 1},
			{"github OPTIONS", github, "github-points", newReq(ctx, "OPTIONS", "https://api.github.com/user", ""), 1},
			{"github POST", github, "github-points", newReq(ctx, "POST", "https://api.github.com/user/repos", "{}"), 5},
			{"github PATCH", github, "github-points", newReq(ctx, "PATCH", "https://api.github.com/user", "{}"), 5},
			{"github PUT", github, "github-points", newReq(ctx, "PUT", "https://api.github.com/user/starred/o/r", ""), 5},
			{"github DELETE", github, "github-points", newReq(ctx, "DELETE", "https://api.github.com/repos/o/r", ""), 5},
		})
	})
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

func TestGitHubDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "github primary 403 remaining 0 waits for reset", dialect: providers.GitHub, status: 403, now: time.Unix(1372700873-40, 0),
			h: hdr("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0", "x-ratelimit-used", "5000",
				"x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core"),
			want: header.Signal{Limited: true, RetryAfter: 40 * time.Second, HasRetryAfter: true, Scope: "core", Dialect: "github",
				Quotas: []header.Quota{q("requests", "requests", 5000, 0, 40*time.Second)}},
		},
		{
			name: "github 403 with retry-after", dialect: providers.GitHub, status: 403,
			h: hdr("retry-after", "30", "x-ratelimit-remaining", "100"),
			want: header.Signal{Limited: true, RetryAfter: 30 * time.Second, HasRetryAfter: true,
				Quotas: []header.Quota{{Name: "requests", Unit: "requests", Remaining: 100, HasRemaining: true}}},
		},
		{
			name: "github secondary 429 waits a minute", dialect: providers.GitHub, status: 429,
			h: hdr("x-ratelimit-remaining", "4000", "x-ratelimit-resource", "core"),
			want: header.Signal{Limited: true, RetryAfter: time.Minute, HasRetryAfter: true, Scope: "core", Dialect: "github",
				Quotas: []header.Quota{{Name: "requests", Unit: "requests", Remaining: 4000, HasRemaining: true}}},
		},
		{
			name: "github 403 permission error is not limited", dialect: providers.GitHub, status: 403,
			h:    hdr("x-ratelimit-remaining", "4000"),
			want: header.Signal{Quotas: []header.Quota{{Name: "requests", Unit: "requests", Remaining: 4000, HasRemaining: true}}},
		},
		{
			name: "github 200 search resource", dialect: providers.GitHub, status: 200, now: time.Unix(1372700873-40, 0),
			h:    hdr("x-ratelimit-limit", "30", "x-ratelimit-remaining", "29", "x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "search"),
			want: header.Signal{Scope: "search", Dialect: "github", Quotas: []header.Quota{q("requests", "requests", 30, 29, 40*time.Second)}},
		},
	})
}
