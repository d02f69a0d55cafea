package throttletest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// GitHubConfig tunes [GitHub]. The zero value is api.github.com for one
// user: 5,000 requests an hour, and the documented secondary limits.
type GitHubConfig struct {
	// Hourly is the primary limit of authenticated requests per hour. If
	// ≤ 0, 5,000 (a user or an app installation).
	Hourly int

	// Status is the status of a refusal: 403 (if 0, as GitHub mostly
	// answers) or 429 (GitHub answers either).
	Status int
}

// GitHub rule names, in the order they are checked.
const (
	GitHubCore            = "github-core"
	GitHubSearch          = "github-search"
	GitHubUnauthenticated = "github-unauthenticated"
	GitHubConcurrency     = "github-secondary-concurrency"
	GitHubPoints          = "github-secondary-points"
)

// GitHub returns a simulated GitHub REST API
// (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api,
// read 2026-11). The primary limits are fixed windows on Unix-aligned
// boundaries (an hourly window resets on the hour), per user, the
// request's Authorization header:
//
//   - github-core: Hourly requests/h, authenticated, except search
//     (x-ratelimit-resource: core);
//   - github-search: 30 authenticated searches/min, /search/...
//     (resource search);
//   - github-unauthenticated: 60 requests/h without Authorization
//     (resource core).
//
// Every answer carries the primary limit's x-ratelimit-limit, -remaining,
// -used, -reset (epoch seconds of the window's end) and -resource; over it,
// status 403 (or [GitHubConfig.Status]) with x-ratelimit-remaining: 0 and
// GitHub's "API rate limit exceeded" body, and no retry-after.
//
// The secondary limits answer 403 (or Status) with retry-after and the
// "secondary rate limit" body:
//
//   - github-secondary-concurrency: 100 requests in flight per user
//     (retry-after: 60, GitHub's "wait at least one minute");
//   - github-secondary-points: 900 points/min per user and endpoint (the
//     method and path), a sliding log; GET, HEAD and OPTIONS cost 1 point,
//     other methods 5 (retry-after: the seconds until the points allow
//     it).
//
// During a [Handler.Pause] every answer is the secondary one, with the
// pause's rest as retry-after. An admitted request is answered 200 with
// "{}".
func GitHub(c GitHubConfig) Profile {
	hourly := c.Hourly
	if hourly <= 0 {
		hourly = 5000
	}
	status := c.Status
	if status == 0 {
		status = http.StatusForbidden
	}
	user := throttle.KeyHeader("Authorization")
	authed := func(r *http.Request) bool { return r.Header.Get("Authorization") != "" }
	search := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/search/") }
	window := func(name string, rate int, per time.Duration, f func(*http.Request) bool) throttle.Rule {
		return throttle.Rule{
			Name:      name,
			Limit:     throttle.Limit{Rate: rate, Period: per},
			Algorithm: throttle.FixedWindow,
			Match:     throttle.Match{Func: f},
			Key:       user,
		}
	}
	return Profile{
		Name: "github",
		Rules: []throttle.Rule{
			window(GitHubCore, hourly, time.Hour, func(r *http.Request) bool { return authed(r) && !search(r) }),
			window(GitHubSearch, 30, time.Minute, func(r *http.Request) bool { return authed(r) && search(r) }),
			window(GitHubUnauthenticated, 60, time.Hour, func(r *http.Request) bool { return !authed(r) && !search(r) }),
			{Name: GitHubConcurrency, Concurrency: 100, Key: user},
			{
				Name:      GitHubPoints,
				Limit:     throttle.Limit{Rate: 900, Period: time.Minute},
				Algorithm: throttle.SlidingLog,
				Key:       func(r *http.Request) string { return user(r) + "\x00" + r.Method + " " + r.URL.Path },
				Cost:      githubPoints,
			},
		},
		Answer: githubAnswer(status),
	}
}

// githubPoints is a request's cost under the secondary limit on points.
func githubPoints(r *http.Request) int {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// githubPrimary are the primary rules and their x-ratelimit-resource.
var githubPrimary = [...]struct{ rule, resource string }{
	{GitHubCore, "core"}, {GitHubSearch, "search"}, {GitHubUnauthenticated, "core"},
}

func githubAnswer(status int) func(*http.Request, Decision) Answer {
	return func(_ *http.Request, d Decision) Answer {
		var a Answer
		switch {
		case d.Admitted:
			a = jsonAnswer(http.StatusOK, struct{}{})
		case d.Paused || d.Rule == GitHubConcurrency || d.Rule == GitHubPoints:
			a = jsonAnswer(status, map[string]string{
				"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
				"documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits",
			})
			wait := d.Wait
			if d.Concurrency {
				wait = time.Minute
			}
			a.Header.Set("Retry-After", retryAfterSeconds(wait))
		default:
			a = jsonAnswer(status, map[string]string{
				"message":           "API rate limit exceeded. (But here's the good news: Authenticated requests get a higher rate limit.)",
				"documentation_url": "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
			})
		}
		for _, p := range githubPrimary {
			q, ok := d.Quota(p.rule)
			if !ok {
				continue
			}
			reset := d.Now.Add(q.Reset)
			// The window's end in whole seconds, rounded up: never a
			// reset before the window has really reset.
			secs := reset.Unix()
			if reset.Nanosecond() > 0 {
				secs++
			}
			a.Header.Set("X-Ratelimit-Limit", strconv.FormatInt(q.Size, 10))
			a.Header.Set("X-Ratelimit-Remaining", strconv.FormatInt(q.Remaining, 10))
			a.Header.Set("X-Ratelimit-Used", strconv.FormatInt(q.Used, 10))
			a.Header.Set("X-Ratelimit-Reset", strconv.FormatInt(secs, 10))
			a.Header.Set("X-Ratelimit-Resource", p.resource)
			break
		}
		return a
	}
}
