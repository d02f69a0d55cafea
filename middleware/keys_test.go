package middleware_test

import (
	"context"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	key := middleware.ClientIP(trusted...)
	tests := []struct {
		name   string
		remote string
		hv     []string
		want   string
	}{
		{"direct client", "203.0.113.7:5000", nil, "203.0.113.7"},
		{"spoofed XFF from an untrusted peer", "203.0.113.7:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.7"},
		{"spoofed Forwarded from an untrusted peer", "203.0.113.7:5000", []string{"Forwarded", "for=198.51.100.1"}, "203.0.113.7"},
		{"one trusted proxy", "10.1.2.3:80", []string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"client spoofs behind a trusted proxy", "10.1.2.3:80", []string{"X-Forwarded-For", "1.2.3.4, 198.51.100.1"}, "198.51.100.1"},
		{"two trusted proxies", "10.1.2.3:80", []string{"X-Forwarded-For", "198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"garbage before the real client", "10.1.2.3:80", []string{"X-Forwarded-For", "not-an-ip, 198.51.100.1"}, "198.51.100.1"},
		{"garbage as the last hop", "10.1.2.3:80", []string{"X-Forwarded-For", "198.51.100.1, garbage"}, "10.1.2.3"},
		{"trusted proxy, no header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"Forwarded wins over XFF", "10.1.2.3:80", []string{"Forwarded", `for="[2001:db8::1]:4711";proto=https`, "X-Forwarded-For", "198.51.100.1"}, "2001:db8::/64"},
		{"Forwarded, several elements", "10.1.2.3:80", []string{"Forwarded", "for=198.51.100.9, for=10.4.4.4;by=10.1.2.3"}, "198.51.100.9"},
		{"Forwarded unknown node", "10.1.2.3:80", []string{"Forwarded", "for=unknown"}, "10.1.2.3"},
		{"IPv6 peer trusted", "[fd00::1]:443", []string{"X-Forwarded-For", "2001:db8::2"}, "2001:db8::/64"},
		{"IPv6 clients of one /64 share a key", "[2001:db8::1:2:3:4]:443", nil, "2001:db8::/64"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:1", nil, "203.0.113.7"},
		{"all hops trusted", "10.1.2.3:80", []string{"X-Forwarded-For", "10.5.5.5, 10.6.6.6"}, "10.5.5.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get("/", tt.hv...)
			r.RemoteAddr = tt.remote
			if got := key(r); got != tt.want {
				t.Errorf("ClientIP = %q, want %q", got, tt.want)
			}
		})
	}
	r := get("/", "X-Forwarded-For", "198.51.100.1")
	r.RemoteAddr = "10.1.2.3:80"
	if got := middleware.ClientIP()(r); got != "10.1.2.3" {
		t.Errorf("no trusted proxies: %q, want the peer", got)
	}
}

func TestAPIKey(t *testing.T) {
	key := middleware.APIKey("Authorization")
	for _, tt := range []struct{ header, want string }{
		{"Bearer sk_live_abc", "sk_live_abc"},
		{"bearer  sk_live_abc ", "sk_live_abc"},
		{"Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"},
		{"sk_live_abc", "sk_live_abc"},
		{"", ""},
	} {
		if got := key(get("/", "Authorization", tt.header)); got != tt.want {
			t.Errorf("APIKey(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

// TestKeysPartition: each API key, account and IP has buckets of its own.
func TestKeysPartition(t *testing.T) {
	limit := throttle.Limit{Rate: 2, Period: time.Minute, Burst: 2}
	tests := []struct {
		name string
		rule throttle.Rule
		a, b func() *http.Request
	}{
		{"API key", throttle.Rule{Name: "key", Limit: limit, Key: middleware.APIKey("Authorization")},
			func() *http.Request { return get("/", "Authorization", "Bearer a") },
			func() *http.Request { return get("/", "Authorization", "Bearer b") }},
		{"account", throttle.Rule{Name: "acct", Limit: limit, Key: middleware.KeyHeader("X-Account")},
			func() *http.Request { return get("/", "X-Account", "1") },
			func() *http.Request { return get("/", "X-Account", "2") }},
		{"IP", throttle.Rule{Name: "ip", Limit: limit, Key: middleware.ClientIP()},
			func() *http.Request { r := get("/"); r.RemoteAddr = "203.0.113.1:1"; return r },
			func() *http.Request { r := get("/"); r.RemoteAddr = "203.0.113.2:1"; return r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(tt.rule))
			if got := statuses(l, 3, tt.a); count(got, 429) != 1 {
				t.Errorf("client a: %v, want the third refused", got)
			}
			if got := statuses(l, 2, tt.b); count(got, 200) != 2 {
				t.Errorf("client b: %v, want both admitted", got)
			}
		})
	}
}

// TestAPIKeyHashed: the raw API key is in no bucket key; its hash is.
func TestAPIKeyHashed(t *testing.T) {
	const secret = "sk_live_SECRET_0123456789"
	l := mustNew(t, middleware.WithClock(newClock()), middleware.WithRules(throttle.Rule{
		Name: "key", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 10}, Key: middleware.APIKey("Authorization"),
	}))
	serve(l, nil, get("/", "Authorization", "Bearer "+secret))
	keys := middleware.BucketKeys(l)
	if len(keys) != 1 {
		t.Fatalf("bucket keys %v, want one", keys)
	}
	for _, k := range keys {
		if contains(k, secret) || contains(k, "SECRET") {
			t.Errorf("bucket key %q holds the raw key", k)
		}
	}
	d, err := l.Take(context.Background(), "", secret, 1)
	if err != nil || !d.Allowed || d.Rules[0].Remaining != 8 {
		t.Errorf("Take of the same key: %+v, %v; want its bucket shared with the requests", d, err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
