package header_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/throttlekit/throttle/header"
)

// A GitHub response that spent the hourly quota: the quota and its reset
// are read from X-RateLimit-*, and Wait names the time to come back.
func ExampleParse() {
	now := time.Unix(1372700833, 0)
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "1372700873") // a Unix time, 40 s after now
	h.Set("X-RateLimit-Resource", "core")

	sig := header.Parse(http.StatusForbidden, h, now, 0)
	q, _ := sig.Quota("requests")
	wait, ok := sig.Wait()
	fmt.Println(q.Limit, q.Exhausted(), sig.Scope)
	fmt.Println(wait, ok)
	// Output:
	// 5000 true core
	// 40s true
}

// A 429 with the IETF fields of draft -10: one quota per policy, and a
// Retry-After that takes precedence over every reset.
func ExampleParse_ietf() {
	now := time.Unix(1700000000, 0)
	h := http.Header{}
	h.Set("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	h.Set("RateLimit", `"burst";r=0;t=30, "daily";r=900;t=3600`)
	h.Set("Retry-After", "12")

	sig := header.Parse(http.StatusTooManyRequests, h, now, time.Minute)
	for _, q := range sig.Quotas {
		fmt.Println(q)
	}
	fmt.Println(sig.Limited, sig.RetryAfter, sig.Capped)
	// Output:
	// {burst unit=requests limit=100 remaining=0 reset=30s window=1m0s}
	// {daily unit=requests limit=1000 remaining=900 reset=1m0s window=24h0m0s}
	// true 12s true
}

// A dialect for a server that sends its own fields: a 403 with
// X-Acme-Quota-Left: 0 means "rate limited", and X-Acme-Retry-In names the
// wait in seconds.
func ExampleDialectFunc() {
	acme := header.DialectFunc(func(status int, h http.Header, _ time.Time, s *header.Signal) {
		left, ok := header.ParseCount(header.Value(h, "X-Acme-Quota-Left", 64))
		if !ok {
			return
		}
		s.SetQuota(header.Quota{Name: "acme", Remaining: left, HasRemaining: true})
		if status == http.StatusForbidden && left == 0 {
			s.Limited = true
		}
		if d, ok := header.ParseDelaySeconds(header.Value(h, "X-Acme-Retry-In", 64)); ok {
			s.RetryAfter, s.HasRetryAfter = d, true
		}
	})

	h := http.Header{}
	h.Set("X-Acme-Quota-Left", "0")
	h.Set("X-Acme-Retry-In", "2.5")
	sig := header.Parse(http.StatusForbidden, h, time.Now(), 0, acme)
	fmt.Println(sig.Limited, sig.RetryAfter, sig.Quotas)
	// Output:
	// true 2.5s [{acme unit=requests remaining=0}]
}
