package throttletest_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

func TestGitHubPrimary(t *testing.T) {
	for _, status := range []int{0, http.StatusTooManyRequests} {
		want := status
		if want == 0 {
			want = http.StatusForbidden
		}
		t.Run(strconv.Itoa(want), func(t *testing.T) {
			h, fc := newHandler(t, throttletest.GitHub(throttletest.GitHubConfig{Hourly: 3, Status: status}))
			auth := http.Header{"Authorization": {"token ghp_a"}}
			reset := strconv.FormatInt(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC).Unix(), 10)
			for i := 1; i <= 3; i++ {
				resp := serve(h, "GET", "/repos/o/r", auth, "")
				wantHeader := map[string]string{
					"X-Ratelimit-Limit": "3", "X-Ratelimit-Remaining": strconv.Itoa(3 - i),
					"X-Ratelimit-Used": strconv.Itoa(i), "X-Ratelimit-Reset": reset, "X-Ratelimit-Resource": "core",
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
				for k, v := range wantHeader {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("request %d: %s %q, want %q", i, k, got, v)
					}
				}
			}
			resp := serve(h, "GET", "/repos/o/r", auth, "")
			if resp.StatusCode != want || resp.Header.Get("X-Ratelimit-Remaining") != "0" || resp.Header.Get("Retry-After") != "" {
				t.Fatalf("over the hour's quota: status %d, remaining %q, retry-after %q; want %d, 0, none",
					resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"), resp.Header.Get("Retry-After"), want)
			}
			if m := decode(t, resp)["message"]; m == nil || m == "" {
				t.Error("no message in the body")
			}
			sig := header.Parse(resp.StatusCode, resp.Header, fc.Now(), 2*time.Hour, providers.GitHub)
			if !sig.Limited || !sig.HasRetryAfter || sig.RetryAfter != 59*time.Minute+59*time.Second+750*time.Millisecond {
				t.Errorf("the client reads %+v: want Limited, wait until 11:00", sig)
			}
			// On the hour the window resets.
			fc.Set(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
			if resp := serve(h, "GET", "/repos/o/r", auth, ""); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Ratelimit-Used") != "1" {
				t.Errorf("at 11:00: status %d, used %q; want 200, 1", resp.StatusCode, resp.Header.Get("X-Ratelimit-Used"))
			}
			if rep := h.Report(); rep.Refused[throttletest.GitHubCore] != 1 {
				t.Errorf("refused %v", rep.Refused)
			}
		})
	}
}

func TestGitHubSearchAndUnauthenticated(t *testing.T) {
	h, _ := newHandler(t, throttletest.GitHub(throttletest.GitHubConfig{}))
	resp := serve(h, "GET", "/search/issues?q=x", http.Header{"Authorization": {"token ghp_a"}}, "")
	if resp.Header.Get("X-Ratelimit-Resource") != "search" || resp.Header.Get("X-Ratelimit-Limit") != "30" {
		t.Errorf("search: resource %q, limit %q; want search, 30", resp.Header.Get("X-Ratelimit-Resource"), resp.Header.Get("X-Ratelimit-Limit"))
	}
	resp = serve(h, "GET", "/repos/o/r", nil, "")
	if resp.Header.Get("X-Ratelimit-Resource") != "core" || resp.Header.Get("X-Ratelimit-Limit") != "60" {
		t.Errorf("unauthenticated: resource %q, limit %q; want core, 60", resp.Header.Get("X-Ratelimit-Resource"), resp.Header.Get("X-Ratelimit-Limit"))
	}
}

func TestGitHubSecondaryPoints(t *testing.T) {
	h, fc := newHandler(t, throttletest.GitHub(throttletest.GitHubConfig{Hourly: 10000}))
	auth := http.Header{"Authorization": {"token ghp_a"}}
	// 180 POSTs at 5 points are the endpoint's 900 points a minute.
	for i := range 180 {
		if resp := serve(h, "POST", "/repos/o/r/issues", auth, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %d: status %d", i+1, resp.StatusCode)
		}
	}
	fc.Advance(30 * time.Second)
	resp := serve(h, "POST", "/repos/o/r/issues", auth, "")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("over the points: status %d, retry-after %q; want 403, 30", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	sig := header.Parse(resp.StatusCode, resp.Header, fc.Now(), 0, providers.GitHub)
	if !sig.Limited || sig.RetryAfter != 30*time.Second {
		t.Errorf("the client reads %+v: want Limited, wait 30s", sig)
	}
	// Another endpoint has its own points.
	if resp := serve(h, "GET", "/repos/o/r/pulls", auth, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("another endpoint: status %d", resp.StatusCode)
	}
}
