package header_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
)

func TestParse(t *testing.T) {
	now := time.Date(2019, time.August, 5, 9, 27, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		h       http.Header
		maxWait time.Duration
		check   func(t *testing.T, s header.Signal)
	}{
		{
			name: "200 without headers says nothing", status: 200, h: http.Header{},
			check: func(t *testing.T, s header.Signal) {
				if s.Limited || s.HasRetryAfter || len(s.Quotas) != 0 || s.Scope != "" {
					t.Fatalf("got %+v; want zero signal", s)
				}
			},
		},
		{
			name: "429 slack retry-after", status: 429, h: hdr("Retry-After", "30"),
			check: func(t *testing.T, s header.Signal) {
				wantWait(t, s, 30*time.Second)
				if !s.Limited {
					t.Fatal("429 must be Limited")
				}
			},
		},
		{
			name: "429 without retry-after is limited", status: 429, h: http.Header{},
			check: func(t *testing.T, s header.Signal) {
				if !s.Limited || s.HasRetryAfter {
					t.Fatalf("got %+v; want Limited without RetryAfter", s)
				}
			},
		},
		{
			name: "503 with retry-after is limited", status: 503, h: hdr("Retry-After", "5"),
			check: func(t *testing.T, s header.Signal) {
				if !s.Limited {
					t.Fatal("want Limited")
				}
			},
		},
		{
			name: "503 without retry-after is not limited", status: 503, h: http.Header{},
			check: func(t *testing.T, s header.Signal) {
				if s.Limited {
					t.Fatal("want not Limited")
				}
			},
		},
		{
			name: "retry-after-ms takes precedence", status: 429, h: hdr("Retry-After-Ms", "10", "Retry-After", "3"),
			check: func(t *testing.T, s header.Signal) { wantWait(t, s, 10*time.Millisecond) },
		},
		{
			name: "invalid retry-after-ms falls back", status: 429, h: hdr("Retry-After-Ms", "x", "Retry-After", "3"),
			check: func(t *testing.T, s header.Signal) { wantWait(t, s, 3*time.Second) },
		},
		{
			name: "retry-after capped at default", status: 429, h: hdr("Retry-After", "99999999"),
			check: func(t *testing.T, s header.Signal) {
				wantWait(t, s, header.DefaultMaxRetryAfter)
				if !s.Capped {
					t.Fatal("want Capped")
				}
			},
		},
		{
			name: "retry-after capped at maxWait", status: 429, h: hdr("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), maxWait: 10 * time.Second,
			check: func(t *testing.T, s header.Signal) { wantWait(t, s, 10*time.Second) },
		},
		{
			name: "IETF 429 example: retry-after beats t", status: 429,
			h: hdr("Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT", "RateLimit", `"default";r=0;t=5`),
			check: func(t *testing.T, s header.Signal) {
				wantWait(t, s, 5*time.Second)
				q, ok := s.Quota("default")
				if !ok || !q.Exhausted() || q.Reset != 5*time.Second {
					t.Fatalf("quota = %+v, %v", q, ok)
				}
			},
		},
		{
			name: "reset capped and flagged", status: 200, h: hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3600"),
			check: func(t *testing.T, s header.Signal) {
				q, _ := s.Quota("requests")
				if q.Reset != header.DefaultMaxRetryAfter || !s.Capped {
					t.Fatalf("got %+v; want Reset capped", s)
				}
			},
		},
		{
			name: "window not capped at maxWait", status: 200, h: hdr("RateLimit-Policy", `"daily";q=1000;w=86400`),
			check: func(t *testing.T, s header.Signal) {
				q, _ := s.Quota("daily")
				if q.Window != 24*time.Hour || s.Capped {
					t.Fatalf("got %+v", s)
				}
			},
		},
		{
			name: "x-ratelimit-resource is scope", status: 200, h: hdr("X-RateLimit-Remaining", "9", "X-RateLimit-Resource", "search"),
			check: func(t *testing.T, s header.Signal) {
				if s.Scope != "search" {
					t.Fatalf("Scope = %q", s.Scope)
				}
			},
		},
		{
			name: "x-should-retry", status: 500, h: hdr("X-Should-Retry", "false"),
			check: func(t *testing.T, s header.Signal) {
				if s.ShouldRetry != header.RetryHintDoNotRetry {
					t.Fatalf("ShouldRetry = %v", s.ShouldRetry)
				}
			},
		},
		{
			name: "x-ratelimit and IETF together", status: 200,
			h: hdr("X-RateLimit-Remaining", "1", "RateLimit", `"burst";r=2`),
			check: func(t *testing.T, s header.Signal) {
				if len(s.Quotas) != 2 {
					t.Fatalf("Quotas = %v", s.Quotas)
				}
			},
		},
		{
			name: "nil header", status: 429, h: nil,
			check: func(t *testing.T, s header.Signal) {
				if !s.Limited {
					t.Fatal("want Limited")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, header.Parse(tt.status, tt.h, now, tt.maxWait))
		})
	}
}

func wantWait(t *testing.T, s header.Signal, want time.Duration) {
	t.Helper()
	if !s.HasRetryAfter || s.RetryAfter != want {
		t.Fatalf("RetryAfter = %v (has %v); want %v", s.RetryAfter, s.HasRetryAfter, want)
	}
}

func TestSignalDialects(t *testing.T) {
	now := time.Unix(1700000000, 0)
	var order []string
	first := header.DialectFunc(func(status int, h http.Header, now time.Time, s *header.Signal) {
		order = append(order, "first")
		s.Limited = status == http.StatusForbidden
		s.RetryAfter, s.HasRetryAfter = -time.Hour, true // must be clamped to 0
		s.SetQuota(header.Quota{Name: "x", Limit: -1, HasLimit: true, Remaining: 5, HasRemaining: true, Reset: 100 * time.Hour, HasReset: true})
	})
	second := header.DialectFunc(func(_ int, _ http.Header, _ time.Time, s *header.Signal) {
		order = append(order, "second")
		s.Scope = strings.Repeat("s", 1000) // over-long text is cleared
	})
	s := header.Parse(http.StatusForbidden, http.Header{}, now, time.Minute, first, nil, second)
	if fmt.Sprint(order) != "[first second]" {
		t.Fatalf("order = %v", order)
	}
	if !s.Limited || s.RetryAfter != 0 || !s.HasRetryAfter || s.Scope != "" {
		t.Fatalf("got %+v", s)
	}
	q, ok := s.Quota("x")
	if !ok || q.HasLimit || q.Limit != 0 || q.Remaining != 5 || q.Reset != time.Minute || q.Unit != "requests" || !s.Capped {
		t.Fatalf("quota = %+v, signal %+v", q, s)
	}
}

// TestSignalDialectName: a dialect's name survives Parse when it is a
// short name, and is cleared otherwise, whatever a user's dialect sets;
// the standard parsers set none, and the last dialect to name itself wins.
func TestSignalDialectName(t *testing.T) {
	now := time.Unix(1700000000, 0)
	named := func(name string) header.Dialect {
		return header.DialectFunc(func(_ int, _ http.Header, _ time.Time, s *header.Signal) { s.Dialect = name })
	}
	limited := http.Header{"Retry-After": {"1"}, "X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"0"}}
	if s := header.Parse(http.StatusTooManyRequests, limited, now, 0); s.Dialect != "" {
		t.Fatalf("the standard parsers named a dialect: %q", s.Dialect)
	}
	tests := []struct {
		name, set, want string
	}{
		{"lowercase", "stripe", "stripe"},
		{"mixed, digits and punctuation", "MyCorp-v2_internal.api", "MyCorp-v2_internal.api"},
		{"at the bound", strings.Repeat("d", header.MaxDialectName), strings.Repeat("d", header.MaxDialectName)},
		{"over the bound", strings.Repeat("d", header.MaxDialectName+1), ""},
		{"space", "my dialect", ""},
		{"a header value", "Bearer sk_live_123", ""},
		{"a URL", "https://api.example/v1", ""},
		{"a colon", "acme:prod", ""},
		{"non-ASCII", "straße", ""},
		{"control byte", "a\x00b", ""},
		{"quote", `a"b`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s := header.Parse(http.StatusTooManyRequests, limited, now, 0, named(tt.set)); s.Dialect != tt.want {
				t.Fatalf("Dialect = %q; want %q", s.Dialect, tt.want)
			}
			s := header.Signal{Dialect: tt.set}
			if s.Normalize(0); s.Dialect != tt.want {
				t.Fatalf("after Normalize, Dialect = %q; want %q", s.Dialect, tt.want)
			}
		})
	}
	s := header.Parse(http.StatusTooManyRequests, limited, now, 0, named("first"), named("second"), nil)
	if s.Dialect != "second" {
		t.Fatalf("Dialect = %q; want the last dialect's, second", s.Dialect)
	}
}

func TestSignalSetQuotaReplacesAndBounds(t *testing.T) {
	var s header.Signal
	s.SetQuota(header.Quota{Name: "a", Limit: 1, HasLimit: true})
	s.SetQuota(header.Quota{Name: "a", Limit: 2, HasLimit: true})
	if len(s.Quotas) != 1 || s.Quotas[0].Limit != 2 {
		t.Fatalf("Quotas = %v", s.Quotas)
	}
	for i := range 100 {
		s.SetQuota(header.Quota{Name: fmt.Sprint(i)})
	}
	if len(s.Quotas) != header.MaxQuotas {
		t.Fatalf("len = %d; want %d", len(s.Quotas), header.MaxQuotas)
	}
}

func TestSignalWait(t *testing.T) {
	tests := []struct {
		name string
		s    header.Signal
		want time.Duration
		ok   bool
	}{
		{"nothing", header.Signal{}, 0, false},
		{"retry-after wins", header.Signal{RetryAfter: time.Second, HasRetryAfter: true, Quotas: []header.Quota{{Remaining: 0, HasRemaining: true, Reset: time.Hour, HasReset: true}}}, time.Second, true},
		{"longest exhausted reset", header.Signal{Quotas: []header.Quota{
			{Remaining: 0, HasRemaining: true, Reset: 5 * time.Second, HasReset: true},
			{Remaining: 0, HasRemaining: true, Reset: 9 * time.Second, HasReset: true},
			{Remaining: 3, HasRemaining: true, Reset: time.Hour, HasReset: true},
		}}, 9 * time.Second, true},
		{"not exhausted", header.Signal{Quotas: []header.Quota{{Remaining: 3, HasRemaining: true, Reset: time.Hour, HasReset: true}}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.s.Wait()
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Wait() = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSignalQuotaStringRedactsPartitionKey(t *testing.T) {
	s := header.Signal{Quotas: []header.Quota{{Name: "u", PartitionKey: "c2VjcmV0LWtleQ=="}}}
	for _, out := range []string{s.Quotas[0].String(), fmt.Sprintf("%v", s), fmt.Sprintf("%+v", s)} {
		if strings.Contains(out, "c2VjcmV0") || !strings.Contains(out, "redacted") {
			t.Fatalf("output leaks or lacks redaction: %s", out)
		}
	}
}

// garbledValues are hostile header values for the property tests.
var garbledValues = []string{
	"", " ", "0", "1", "-1", "60", "2.0", "64.57", "1470173023.123", "1470173023123",
	"99999999999999999999", strings.Repeat("9", 400), "NaN", "Inf", "-Inf", "+Inf", "1e308", "0x1p62",
	"Fri, 31 Dec 9999 23:59:59 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
	"Sun Nov  6 08:49:37 1994", "6m0s", "1h2m3.5s", "32/40", "api-usage=18/5000",
	`"default";r=0;t=5`, `"burst";q=100;w=60,"daily";q=1000;w=86400`, `"a";r=-5;t=-5`,
	`"a";q=999999999999999;w=999999999999999`, `"a";r=999999999999999;t=999999999999999`,
	"limit=100, remaining=50, reset=5", "limit=-1, remaining=-1, reset=99999999999999",
	"100;w=10", "10;w=1, 50;w=60", "\x00\xff", "true", "false", "global",
}

var garbledNames = []string{
	"Retry-After", "Retry-After-Ms", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"X-RateLimit-Reset-After", "X-RateLimit-Used", "X-Rate-Limit-Reset", "X-Rate-Limit-Remaining",
	"RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-Should-Retry", "X-RateLimit-Resource",
}

// randomGarbledHeader builds a header from garbled values and random bytes,
// sometimes repeating a field many times.
func randomGarbledHeader(r *rand.Rand) http.Header {
	h := http.Header{}
	for range r.IntN(12) {
		name := garbledNames[r.IntN(len(garbledNames))]
		var v string
		switch r.IntN(4) {
		case 0:
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			v = string(b)
		case 1:
			v = fmt.Sprint(r.Int64() - r.Int64())
		default:
			v = garbledValues[r.IntN(len(garbledValues))]
		}
		lines := 1
		if r.IntN(20) == 0 {
			lines = 2000
		}
		for range lines {
			h.Add(name, v)
		}
	}
	return h
}

// checkSignalInvariants asserts what Parse guarantees for any input.
func checkSignalInvariants(t *testing.T, s header.Signal, maxWait time.Duration) {
	t.Helper()
	if maxWait <= 0 {
		maxWait = header.DefaultMaxRetryAfter
	}
	if s.RetryAfter < 0 || s.RetryAfter > maxWait {
		t.Fatalf("RetryAfter %v outside [0, %v]", s.RetryAfter, maxWait)
	}
	if len(s.Quotas) > header.MaxQuotas {
		t.Fatalf("%d quotas", len(s.Quotas))
	}
	for _, q := range s.Quotas {
		if q.Reset < 0 || q.Reset > maxWait {
			t.Fatalf("Reset %v outside [0, %v]", q.Reset, maxWait)
		}
		if q.Window < 0 || q.Window > header.MaxQuotaWindow {
			t.Fatalf("Window %v outside [0, %v]", q.Window, header.MaxQuotaWindow)
		}
		if q.Remaining < 0 || q.Limit < 0 {
			t.Fatalf("negative count in %+v", q)
		}
	}
	if w, _ := s.Wait(); w < 0 || w > maxWait {
		t.Fatalf("Wait %v outside [0, %v]", w, maxWait)
	}
	if !header.IsDialectName(s.Dialect) {
		t.Fatalf("Dialect %q is not a short name", s.Dialect)
	}
}

func TestSignalPropertiesGarbledHeaders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2)) // seeded: failures reproduce
	statuses := []int{200, 403, 429, 503, 500}
	maxWaits := []time.Duration{0, -time.Second, time.Nanosecond, time.Second, time.Hour}
	nows := []time.Time{time.Unix(0, 0), time.Unix(1470173000, 0), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 3000 {
		h := randomGarbledHeader(r)
		maxWait := maxWaits[r.IntN(len(maxWaits))]
		now := nows[r.IntN(len(nows))]
		s := header.Parse(statuses[r.IntN(len(statuses))], h, now, maxWait)
		checkSignalInvariants(t, s, maxWait)
		if i%500 == 0 && t.Failed() {
			t.Fatalf("header %v", h)
		}
	}
}

func TestSignalPropertiesSingleParsers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Unix(1700000000, 0)
	for range 20000 {
		v := garbledValues[r.IntN(len(garbledValues))]
		if r.IntN(2) == 0 {
			b := []byte(v)
			if len(b) > 0 {
				b[r.IntN(len(b))] = byte(r.IntN(256))
			}
			v = string(b)
		}
		for name, f := range map[string]func(string) (time.Duration, bool){
			"ParseRetryAfter":       func(v string) (time.Duration, bool) { return header.ParseRetryAfter(v, now) },
			"ParseRetryAfterMillis": header.ParseRetryAfterMillis,
			"ParseDelaySeconds":     header.ParseDelaySeconds,
			"ParseReset":            func(v string) (time.Duration, bool) { return header.ParseReset(v, now) },
		} {
			if d, ok := f(v); d < 0 || (!ok && d != 0) {
				t.Fatalf("%s(%q) = %v, %v", name, v, d, ok)
			}
		}
		if n, ok := header.ParseCount(v); n < 0 || (!ok && n != 0) {
			t.Fatalf("ParseCount(%q) = %d, %v", v, n, ok)
		}
	}
}
