package middleware_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/middleware"
)

// A server limited to 3 requests a minute per API key: the fourth is
// answered 429 with Retry-After and a JSON body, and every answer carries
// the rate-limit headers.
func Example() {
	l, err := middleware.New(middleware.WithRules(throttle.Rule{
		Name:  "default",
		Limit: throttle.Limit{Rate: 3, Period: time.Minute, Burst: 3},
		Key:   middleware.APIKey("Authorization"),
	}))
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})))
	defer srv.Close()

	for range 4 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("RateLimit-Policy"))
		if resp.StatusCode == http.StatusTooManyRequests {
			fmt.Print(string(body))
		}
	}
	// Output:
	// 200 2 "default";q=3;w=60
	// 200 1 "default";q=3;w=60
	// 200 0 "default";q=3;w=60
	// 429 0 "default";q=3;w=60
	// {"error":{"type":"rate_limited","message":"rule \"default\" allows 3 requests per 1m0s","rule":"default","retry_after":20}}
}

// Tiers per key: a free plan of 100 requests a minute, a pro plan of
// 10 000.
func ExampleWithTier() {
	key := middleware.APIKey("Authorization")
	plans := map[string]string{"sk_pro": "pro"}
	l, err := middleware.New(
		middleware.WithRules(throttle.Rule{Name: "free", Limit: throttle.Limit{Rate: 100, Period: time.Minute, Burst: 100}, Key: key}),
		middleware.WithTier("pro", throttle.Rule{Name: "pro", Limit: throttle.Limit{Rate: 10_000, Period: time.Minute, Burst: 10_000}, Key: key}),
		middleware.WithTierFunc(func(r *http.Request) string { return plans[key(r)] }),
	)
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, k := range []string{"sk_free", "sk_pro"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+k)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(k, w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// sk_free 100 99
	// sk_pro 10000 9999
}

// The wrapped handler reads its request's decision.
func ExampleDecisionFrom() {
	l, _ := middleware.New(middleware.WithRules(throttle.Rule{Name: "api", Limit: throttle.Limit{Rate: 10, Period: time.Second, Burst: 10}}))
	defer func() { _ = l.Close() }()
	h := l.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		d, _ := middleware.DecisionFrom(r.Context())
		fmt.Println(d.Allowed, d.Rule, d.Limit, d.Remaining)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	// Output: true api 10 9
}

// A provider's own headers in place of the standard ones.
func ExampleWithHeaders() {
	l, _ := middleware.New(
		middleware.WithRules(throttle.Rule{Name: "shop", Limit: throttle.Limit{Rate: 2, Period: time.Second, Burst: 40}}),
		middleware.WithHeaders(func(h http.Header, d middleware.Decision) {
			for _, s := range d.Rules {
				h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", s.Burst-s.Remaining, s.Burst))
			}
		}),
	)
	defer func() { _ = l.Close() }()
	w := httptest.NewRecorder()
	l.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(w.Header().Get("X-Shopify-Shop-Api-Call-Limit"))
	// Output: 1/40
}

// An outside consumer spends the same quota as the requests.
func ExampleLimiter_Take() {
	l, _ := middleware.New(middleware.WithRules(throttle.Rule{
		Name: "account", Limit: throttle.Limit{Rate: 5, Period: time.Minute, Burst: 5}, Key: middleware.KeyHeader("X-Account"),
	}))
	defer func() { _ = l.Close() }()
	d, err := l.Take(context.Background(), "", "acct_42", 5)
	fmt.Println(d.Allowed, d.Remaining, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Account", "acct_42")
	w := httptest.NewRecorder()
	l.Handler(http.NotFoundHandler()).ServeHTTP(w, r)
	fmt.Println(w.Code)
	// Output:
	// true 0 <nil>
	// 429
}

// Behind a load balancer at 10.0.0.0/8, the client is read from
// X-Forwarded-For; from anyone else the header is ignored.
func ExampleClientIP() {
	key := middleware.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 198.51.100.7")
	r.RemoteAddr = "10.0.0.5:41000"
	fmt.Println(key(r))
	r.RemoteAddr = "203.0.113.9:41000"
	fmt.Println(key(r))
	// Output:
	// 198.51.100.7
	// 203.0.113.9
}

// Queueing: a request over the rate waits for its slot, up to the
// maximum wait, instead of being refused.
func ExampleWithMaxWait() {
	l, err := middleware.New(
		middleware.WithMaxWait(2*time.Second),
		middleware.WithRules(throttle.Rule{Name: "drip", Limit: throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}}),
	)
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	h := l.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		d, _ := middleware.DecisionFrom(r.Context())
		fmt.Println(d.Allowed, d.Waited > 0)
	}))
	for range 2 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	// Output:
	// true false
	// true true
}
