package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// GitHubConfig tunes [GitHubPreset]. The zero value describes a fleet
// calling api.github.com as one user or one app installation.
type GitHubConfig struct {
	// Host is the host the rules match. If empty, api.github.com. (GitHub
	// Enterprise Server's limits are set by its administrator: edit the
	// rules to match them.)
	Host string

	// Hourly is the primary limit of authenticated requests per hour. If
	// ≤ 0, 5,000 (a user or an app installation). GitHub gives 15,000 to
	// apps owned by an Enterprise Cloud organisation and up to 12,500 to
	// installations on many repositories.
	Hourly int

	// Key partitions every rule, for a fleet acting as several users or
	// installations, each with its own quota. If nil, all requests share
	// one set of buckets: GitHub counts per user or installation, not per
	// token, so partitioning by token would be wrong for two tokens of one
	// user, and for installation tokens, which expire every hour.
	Key func(*http.Request) string
}

// GitHubPreset returns the limits of GitHub's REST API
// (docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api,
// and the search docs):
//
//   - github-core: 5,000 authenticated requests/h (see
//     [GitHubConfig.Hourly]), burst 1 %, except search.
//   - github-search: 30 authenticated searches/min, except code search;
//     github-code-search: 10/min (changelog 2023-03-10).
//   - github-unauthenticated: 60 requests/h without an Authorization
//     header (GitHub counts them per IP address), and
//     github-unauthenticated-search: 10 searches/min.
//   - github-points: the secondary limit of 900 points/min, a GET, HEAD or
//     OPTIONS costing 1 point and any other method 5 (see [GitHubPoints]).
//     GitHub's page counts points per REST endpoint; the preset keeps one
//     bucket for all endpoints, the cautious reading, which binds before
//     github-core only for a fleet mutating more than 180 times a minute.
//   - github-content-per-minute and github-content-per-hour: the secondary
//     limits of 80 content-creating requests/min and 500/h. Which requests
//     create content is not listed; every POST and PUT counts here.
//   - github-concurrency: the secondary limit of 100 concurrent requests,
//     REST and GraphQL together, fleet-wide (see
//     [throttle.Rule.Concurrency]).
//
// GitHub's other secondary limit (90 s of CPU per minute) is not a rate,
// and GitHub may change the secondary limits without notice: the dialect
// [GitHub] reads its 403/429 answers so the fleet pauses. GraphQL
// (/graphql) has its own points and is matched only by github-concurrency.
func GitHubPreset(c GitHubConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.github.com"
	}
	hourly := c.Hourly
	if hourly <= 0 {
		hourly = 5000
	}
	rest := func(r *http.Request) bool { return r.URL.Path != "/graphql" }
	search := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/search/") }
	codeSearch := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/search/code") }
	rule := func(name string, rate int, per time.Duration, methods []string, f func(*http.Request) bool) throttle.Rule {
		return throttle.Rule{
			Name:  ruleName("github", name),
			Limit: throttle.Limit{Rate: rate, Period: per, Burst: burstOf(rate)},
			Match: throttle.Match{Host: host, Methods: methods, Func: func(r *http.Request) bool { return rest(r) && f(r) }},
			Key:   c.Key,
		}
	}
	points := rule("points", 900, time.Minute, nil, func(*http.Request) bool { return true })
	points.Cost = GitHubPoints
	points.Limit.Burst = max(points.Limit.Burst, 5)
	create := []string{http.MethodPost, http.MethodPut}
	return Preset{
		Name: gitHubName,
		Rules: []throttle.Rule{
			rule("core", hourly, time.Hour, nil, func(r *http.Request) bool { return authenticated(r) && !search(r) }),
			rule("search", 30, time.Minute, nil, func(r *http.Request) bool { return authenticated(r) && search(r) && !codeSearch(r) }),
			rule("code-search", 10, time.Minute, nil, func(r *http.Request) bool { return authenticated(r) && codeSearch(r) }),
			rule("unauthenticated", 60, time.Hour, nil, func(r *http.Request) bool { return !authenticated(r) && !search(r) }),
			rule("unauthenticated-search", 10, time.Minute, nil, func(r *http.Request) bool { return !authenticated(r) && search(r) }),
			points,
			rule("content-per-minute", 80, time.Minute, create, func(*http.Request) bool { return true }),
			rule("content-per-hour", 500, time.Hour, create, func(*http.Request) bool { return true }),
			{Name: ruleName("github", "concurrency"), Concurrency: githubConcurrency, Match: throttle.Match{Host: host}, Key: c.Key},
		},
		Dialect: GitHub,
	}
}

// githubConcurrency is GitHub's secondary limit on concurrent requests
// (docs.github.com, "Rate limits for the REST API", read 2026-11).
const githubConcurrency = 100

// GitHubPoints is the cost of a request under GitHub's secondary limit on
// points: 1 for GET, HEAD and OPTIONS (and a request without a method,
// which is a GET), 5 for any other method.
func GitHubPoints(r *http.Request) int {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
		return 1
	}
	return 5
}

// authenticated reports whether r carries an Authorization header.
func authenticated(r *http.Request) bool { return r.Header.Get("Authorization") != "" }

// githubSecondaryWait is GitHub's documented minimum wait after a
// secondary rate limit that names no retry-after: "wait for at least one
// minute before retrying".
const githubSecondaryWait = time.Minute

// GitHub reads GitHub's REST rate-limit headers. header.Parse already reads
// x-ratelimit-limit/-remaining/-used/-reset (epoch seconds) into the quota
// "requests" and x-ratelimit-resource ("core", "search") into Scope; this
// dialect applies GitHub's documented rules for exceeded limits:
//
//   - 403 or 429 with retry-after: Limited, wait retry-after.
//   - 403 or 429 with x-ratelimit-remaining: 0: Limited, RetryAfter is the
//     time until x-ratelimit-reset.
//   - 429 otherwise (a secondary rate limit): Limited, RetryAfter 60 s
//     ("wait for at least one minute"), unless the server named a wait.
//
// A 403 with remaining > 0 and no retry-after is left unclassified: the
// secondary-limit 403 differs from a permission error only in its body,
// which a header dialect cannot see.
//
// The rules above apply to any response, but the dialect names itself
// "github" in header.Signal.Dialect only for a response carrying
// x-ratelimit-resource, the one rate-limit field of GitHub's that other
// providers do not send.
//
// Source: docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api.
var GitHub header.Dialect = header.DialectFunc(parseGitHub)

// gitHubResource is the canonical key of x-ratelimit-resource, which
// header.Parse reads into Scope.
var gitHubResource = http.CanonicalHeaderKey("X-RateLimit-Resource")

func parseGitHub(status int, h http.Header, _ time.Time, s *header.Signal) {
	if value(h, gitHubResource) != "" {
		s.Dialect = gitHubName
	}
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return
	}
	if s.HasRetryAfter {
		s.Limited = true
		return
	}
	if q, ok := s.Quota("requests"); ok && q.Exhausted() {
		s.Limited = true
		if q.HasReset {
			s.RetryAfter, s.HasRetryAfter = q.Reset, true
		}
		return
	}
	if status == http.StatusTooManyRequests {
		s.Limited = true
		s.RetryAfter, s.HasRetryAfter = githubSecondaryWait, true
	}
}
