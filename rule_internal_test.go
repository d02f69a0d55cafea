package throttle

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/fakeclock"
)

func TestMatch(t *testing.T) {
	get := func(url string) *http.Request {
		r, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	method := func(m, url string) *http.Request { r := get(url); r.Method = m; return r }
	tests := []struct {
		name  string
		m     Match
		req   *http.Request
		match bool
	}{
		{"zero match matches all", Match{}, get("http://a/b"), true},
		{"host", Match{Host: "api.stripe.com"}, get("https://api.stripe.com/v1"), true},
		{"host ignores case", Match{Host: "API.Stripe.com"}, get("https://api.stripe.COM/v1"), true},
		{"host without port matches any port", Match{Host: "api.stripe.com"}, get("https://api.stripe.com:8443/v1"), true},
		{"host with port needs that port", Match{Host: "api.stripe.com:8443"}, get("https://api.stripe.com:8443/v1"), true},
		{"host with port, other port", Match{Host: "api.stripe.com:8443"}, get("https://api.stripe.com:443/v1"), false},
		{"host with port, no port", Match{Host: "api.stripe.com:8443"}, get("https://api.stripe.com/v1"), false},
		{"other host", Match{Host: "api.stripe.com"}, get("https://api.twilio.com/"), false},
		{"host suffix is not a match", Match{Host: "stripe.com"}, get("https://api.stripe.com/"), false},
		{"wildcard subdomain", Match{Host: "*.stripe.com"}, get("https://api.stripe.com/"), true},
		{"wildcard deep subdomain with port", Match{Host: "*.stripe.com"}, get("https://a.b.Stripe.com:443/"), true},
		{"wildcard does not match the apex", Match{Host: "*.stripe.com"}, get("https://stripe.com/"), false},
		{"wildcard needs a dot", Match{Host: "*.stripe.com"}, get("https://evilstripe.com/"), false},
		{"method", Match{Methods: []string{"POST", "PUT"}}, method("PUT", "http://a/"), true},
		{"method ignores case", Match{Methods: []string{"post"}}, method("POST", "http://a/"), true},
		{"other method", Match{Methods: []string{"POST"}}, get("http://a/"), false},
		{"empty method is GET", Match{Methods: []string{"GET"}}, method("", "http://a/"), true},
		{"path prefix", Match{PathPrefix: "/v1/"}, get("http://a/v1/charges"), true},
		{"path prefix miss", Match{PathPrefix: "/v1/"}, get("http://a/v2/charges"), false},
		{"path pattern", Match{Path: "/v1/customers/*"}, get("http://a/v1/customers/cus_1"), true},
		{"path pattern is one segment", Match{Path: "/v1/customers/*"}, get("http://a/v1/customers/cus_1/sources"), false},
		{"func", Match{Func: func(r *http.Request) bool { return r.URL.Query().Get("x") == "1" }}, get("http://a/?x=1"), true},
		{"func false", Match{Func: func(r *http.Request) bool { return false }}, get("http://a/"), false},
		{"all fields must match", Match{Host: "a", Methods: []string{"GET"}, PathPrefix: "/v1", Path: "/v1/*"}, get("http://a/v1/x"), true},
		{"one field failing fails", Match{Host: "a", Methods: []string{"GET"}, PathPrefix: "/v1", Path: "/v1/*"}, get("http://b/v1/x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Matches(tt.req); got != tt.match {
				t.Fatalf("matches = %v, want %v", got, tt.match)
			}
		})
	}
}

// hourRule allows burst requests per hour: on a fake clock that does not
// move, a request beyond the burst would wait an hour.
func hourRule(name string, burst int) Rule {
	return Rule{Name: name, Limit: Limit{Rate: 1, Period: time.Hour, Burst: burst}}
}

func TestPartition(t *testing.T) {
	clk := fakeclock.New(epoch)
	r := hourRule("per-key", 1)
	r.Key = KeyHeader("x-api-key")
	tr := mustNew(t, okBase, WithClock(clk), WithoutWaiting(), WithRules(r))
	send := func(key string) error {
		return roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/", "X-Api-Key", key))
	}
	for _, key := range []string{"sk_live_AAAA", "sk_live_BBBB", ""} {
		if err := send(key); err != nil {
			t.Fatalf("first request of key %q: %v", key, err)
		}
	}
	for _, key := range []string{"sk_live_AAAA", "sk_live_BBBB", ""} {
		if err := send(key); !errors.Is(err, ErrBeyondMaxWait) {
			t.Fatalf("second request of key %q: %v, want ErrBeyondMaxWait", key, err)
		}
	}
	keys := localOf(t, tr).TATs()
	if len(keys) != 3 {
		t.Fatalf("store holds %d buckets, want 3: %v", len(keys), keys)
	}
	for k := range keys {
		if strings.Contains(k, "sk_live") || strings.Contains(k, "AAAA") || !strings.HasPrefix(k, "per-key:") {
			t.Fatalf("store key %q: want the rule name and a hash, never the raw key", k)
		}
	}
}

func TestCost(t *testing.T) {
	clk := fakeclock.New(epoch)
	r := Rule{Name: "weighted", Limit: Limit{Rate: 10, Period: time.Second, Burst: 5}}
	r.Cost = func(r *http.Request) int { n, _ := strconv.Atoi(r.Header.Get("Cost")); return n }
	tr := mustNew(t, okBase, WithClock(clk), WithHeadroom(0), WithoutWaiting(), WithRules(r))
	send := func(cost int) error {
		return roundTrip(tr, newReq(t, context.Background(), "GET", "http://x/", "Cost", strconv.Itoa(cost)))
	}
	if err := send(3); err != nil {
		t.Fatal(err)
	}
	var we *WaitError
	if err := send(3); !errors.As(err, &we) || we.Wait != 100*time.Millisecond {
		t.Fatalf("cost 3 after cost 3 of burst 5: %v, want a wait of one interval", err)
	}
	if err := send(2); err != nil {
		t.Fatalf("cost 2 fits the rest of the burst: %v", err)
	}
	if err := send(0); !errors.As(err, &we) || we.Wait != 100*time.Millisecond {
		t.Fatalf("cost 0 counts as 1: %v", err)
	}

	t.Run("cost above burst is a RuleError and books nothing", func(t *testing.T) {
		before := localOf(t, tr).TATs()
		body := newRecBody()
		req := newReq(t, context.Background(), "POST", "http://x/", "Cost", "6")
		req.Body = body
		err := roundTrip(tr, req)
		var re *RuleError
		if !errors.As(err, &re) || re.Rule != "weighted" || re.Field != "Cost" || !errors.Is(err, ErrInvalidRule) {
			t.Fatalf("err %v, want *RuleError{Rule: weighted, Field: Cost}", err)
		}
		if body.closed.Load() != 1 {
			t.Fatal("body not closed")
		}
		if got := localOf(t, tr).TATs(); !reflect.DeepEqual(got, before) {
			t.Fatalf("store changed: %v → %v", before, got)
		}
	})
}

func TestSeveralRulesAllOrNothing(t *testing.T) {
	clk := fakeclock.New(epoch)
	wide := hourRule("wide", 5)
	narrow := hourRule("narrow", 1)
	narrow.Match = Match{PathPrefix: "/narrow"}
	var sent []string
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.URL.Path)
		return okBase(r)
	})
	tr := mustNew(t, base, WithClock(clk), WithoutWaiting(), WithRules(wide, narrow))
	store := localOf(t, tr)
	send := func(path string) error {
		return roundTrip(tr, newReq(t, context.Background(), "GET", "http://x"+path))
	}
	if err := send("/narrow"); err != nil {
		t.Fatal(err)
	}
	before := store.TATs()
	if len(before) != 2 {
		t.Fatalf("a request matching both rules booked %d buckets, want 2", len(before))
	}
	err := send("/narrow")
	var we *WaitError
	if !errors.As(err, &we) || we.Rule != "narrow" {
		t.Fatalf("err %v, want a *WaitError from rule narrow", err)
	}
	if after := store.TATs(); !reflect.DeepEqual(after, before) {
		t.Fatalf("a rejected request booked the wide rule: %v → %v", before, after)
	}
	// The wide rule still has 4 slots, all free for other paths.
	for i := range 4 {
		if err := send("/wide"); err != nil {
			t.Fatalf("wide request %d: %v", i, err)
		}
	}
	if err := send("/wide"); !errors.As(err, &we) || we.Rule != "wide" {
		t.Fatalf("err %v, want a *WaitError from rule wide", err)
	}
	if len(sent) != 5 {
		t.Fatalf("base saw %d requests, want 5", len(sent))
	}
}
