package fleettest_test

import (
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/internal/fleettest"
)

// The fixed answer the shape tests word: 7 of 100 left in a 1 s window at
// Unix 1700000000.250; the window resets 1.347 s later (Unix
// …001.597) and is replenished in 6 min.
var (
	shapeNow    = time.Unix(1_700_000_000, 250_000_000)
	shapeAnswer = fleettest.Answer{
		Now: shapeNow, Limit: 100, Window: time.Second, Remaining: 7,
		Reset:       shapeNow.Add(1347 * time.Millisecond),
		Replenished: shapeNow.Add(6 * time.Minute),
	}
)

// rejected is shapeAnswer rejected, a slot freeing in retry.
func rejected(retry time.Duration) fleettest.Answer {
	a := shapeAnswer
	a.Remaining, a.Rejected, a.RetryAfter = 0, true, retry
	return a
}

func TestShapeEncode(t *testing.T) {
	xrl := func(reset string) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {reset}}
	}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	ietf := http.Header{"Ratelimit-Policy": {`"default";q=100;w=1`}, "Ratelimit": {`"default";r=7;t=2`}}
	github := http.Header{
		"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Used": {"93"},
		"X-Ratelimit-Reset": {"1700000002"}, "X-Ratelimit-Resource": {"core"},
	}
	openai := http.Header{
		"X-Ratelimit-Limit-Requests": {"100"}, "X-Ratelimit-Remaining-Requests": {"7"},
		"X-Ratelimit-Reset-Requests": {"6m0s"},
	}
	for _, tc := range []struct {
		shape      fleettest.Shape
		ok         http.Header // the success's fields
		rejStatus  int
		rej        http.Header // the rejection's, a slot freeing in 347 ms
		rejLongest http.Header // the rejection's, a slot freeing in 2 s
	}{
		{fleettest.ShapeNone, http.Header{}, 429, http.Header{}, http.Header{}},
		{fleettest.ShapeRetryAfter, http.Header{}, 429, http.Header{"Retry-After": {"1"}}, http.Header{"Retry-After": {"2"}}},
		{fleettest.ShapeXRLUnixCeil, xrl("1700000002"), 429,
			with(xrl("1700000002"), "X-Ratelimit-Remaining", "0", "Retry-After", "1"),
			with(xrl("1700000002"), "X-Ratelimit-Remaining", "0", "Retry-After", "2")},
		{fleettest.ShapeXRLUnixFloor, xrl("1700000001"), 429,
			with(xrl("1700000001"), "X-Ratelimit-Remaining", "0", "Retry-After", "1"), nil},
		{fleettest.ShapeXRLUnixMillis, xrl("1700000001597"), 429,
			with(xrl("1700000001597"), "X-Ratelimit-Remaining", "0", "Retry-After", "1"), nil},
		{fleettest.ShapeXRLDelta, xrl("2"), 429,
			with(xrl("2"), "X-Ratelimit-Remaining", "0", "Retry-After", "1"), nil},
		{fleettest.ShapeXRLDeltaFrac, xrl("1.347"), 429,
			with(xrl("1.347"), "X-Ratelimit-Remaining", "0", "Retry-After", "1"), nil},
		{fleettest.ShapeIETF, ietf, 429,
			with(ietf, "Ratelimit", `"default";r=0;t=2`, "Retry-After", "1"), nil},
		{fleettest.ShapeGitHub, github, 403,
			with(github, "X-Ratelimit-Remaining", "0", "X-Ratelimit-Used", "100"), nil},
		{fleettest.ShapeOpenAI, openai, 429,
			with(openai, "X-Ratelimit-Remaining-Requests", "0", "Retry-After", "1"), nil},
		{fleettest.ShapeShopify, http.Header{"X-Shopify-Shop-Api-Call-Limit": {"93/100"}}, 429,
			http.Header{"X-Shopify-Shop-Api-Call-Limit": {"100/100"}, "Retry-After": {"0.347"}},
			http.Header{"X-Shopify-Shop-Api-Call-Limit": {"100/100"}, "Retry-After": {"2.0"}}},
		{fleettest.ShapeStripe, http.Header{}, 429, http.Header{"Stripe-Rate-Limited-Reason": {"global-rate"}}, nil},
	} {
		t.Run(tc.shape.Name, func(t *testing.T) {
			check := func(what string, a fleettest.Answer, status int, want http.Header) {
				t.Helper()
				if want == nil {
					return
				}
				got := tc.shape.Encode(a)
				if got.Status != status || !sameHeader(got.Header, want) {
					t.Errorf("%s: %d %v, want %d %v", what, got.Status, got.Header, status, want)
				}
			}
			check("success", shapeAnswer, 200, tc.ok)
			check("rejection in 347ms", rejected(347*time.Millisecond), tc.rejStatus, tc.rej)
			check("rejection in 2s", rejected(2*time.Second), tc.rejStatus, tc.rejLongest)
		})
	}
	if got := len(fleettest.Shapes()); got != 12 {
		t.Errorf("%d named shapes, want 12", got)
	}
	for _, s := range fleettest.Shapes() {
		if got, ok := fleettest.ShapeNamed(s.Name); !ok || got.Name != s.Name {
			t.Errorf("ShapeNamed(%q) = %v, %v", s.Name, got.Name, ok)
		}
		for _, d := range s.Dialects {
			if _, ok := fleettest.Dialect(d); !ok {
				t.Errorf("shape %s needs the unknown dialect %q", s.Name, d)
			}
		}
	}
}

func sameHeader(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// TestShapeReadBack checks that header.Parse, with the shape's
// dialects, reads back what each shape says: the limit and remaining
// exactly, the reset within the shape's rounding, the rejection as
// Limited with the wait it names.
func TestShapeReadBack(t *testing.T) {
	trueReset := shapeAnswer.Reset.Sub(shapeNow) // 1.347 s
	for _, s := range fleettest.Shapes() {
		t.Run(s.Name, func(t *testing.T) {
			var ds []header.Dialect
			for _, n := range s.Dialects {
				d, _ := fleettest.Dialect(n)
				ds = append(ds, d)
			}
			ok := s.Encode(shapeAnswer)
			sig := header.Parse(ok.Status, ok.Header, shapeNow, time.Hour, ds...)
			if sig.Limited {
				t.Errorf("success read as Limited: %v", sig)
			}
			if len(sig.Quotas) > 0 {
				q := sig.Quotas[0]
				if !q.HasLimit || q.Limit != 100 || !q.HasRemaining || q.Remaining != 7 {
					t.Errorf("success read as %v, want limit 100, remaining 7", q)
				}
				// Rounding: down by < 1 s (Unix floor), up by < 1 s; OpenAI's
				// reset is the replenishment, 6 min.
				want, lo, hi := trueReset, trueReset-time.Second, trueReset+time.Second
				if s.Name == "openai" {
					want, lo, hi = 6*time.Minute, 6*time.Minute, 6*time.Minute
				}
				shopify := s.Name == "shopify" // names no reset
				if q.HasReset == shopify || (q.HasReset && (q.Reset < lo || q.Reset > hi)) {
					t.Errorf("success's reset read as %v (has %v), want %v within [%v, %v]", q.Reset, q.HasReset, want, lo, hi)
				}
			} else if len(s.Encode(shapeAnswer).Header) > 0 {
				t.Errorf("success's fields %v read as no quota", ok.Header)
			}

			rej := s.Encode(rejected(2 * time.Second))
			sig = header.Parse(rej.Status, rej.Header, shapeNow, time.Hour, ds...)
			if !sig.Limited {
				t.Errorf("rejection %d %v not read as Limited: %v", rej.Status, rej.Header, sig)
			}
			wait, named := sig.Wait()
			if s.Timed() != named {
				t.Errorf("Timed() = %v, but the rejection names a wait: %v", s.Timed(), named)
			}
			if s.ReportsQuota() != (len(s.Encode(shapeAnswer).Header) > 0) {
				t.Errorf("ReportsQuota() = %v, but a success carries %v", s.ReportsQuota(), s.Encode(shapeAnswer).Header)
			}
			switch s.Name {
			case "none", "stripe":
				if named {
					t.Errorf("a rejection without timing read as a wait of %v", wait)
				}
			case "github":
				// GitHub names the reset, not the slot: 1.347 s rounded up
				// to the Unix second.
				if !named || wait < trueReset || wait > trueReset+time.Second {
					t.Errorf("rejection's wait read as %v (%v), want the reset %v rounded up", wait, named, trueReset)
				}
			default:
				if !named || wait != 2*time.Second {
					t.Errorf("rejection's wait read as %v (%v), want 2s", wait, named)
				}
			}
			if s.Name == "stripe" && sig.Reason != "global-rate" {
				t.Errorf("stripe's reason read as %q", sig.Reason)
			}
		})
	}
}
