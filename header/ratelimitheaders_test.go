package header_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
)

// hdr builds an http.Header from name/value pairs, canonicalising names as
// a real response would.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseReset(t *testing.T) {
	now := time.Unix(1470173000, 0)
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"delta seconds", "60", time.Minute, true},
		{"delta fraction", "0.5", 500 * time.Millisecond, true},
		{"epoch seconds", "1470173023", 23 * time.Second, true},
		{"discord epoch decimals", "1470173023.123", 23123 * time.Millisecond, true},
		{"epoch millis", "1470173023123", 23123 * time.Millisecond, true},
		{"epoch in the past", "1372700873", 0, true},
		{"just below epoch threshold is a delta", "999999999", 999999999 * time.Second, true},
		{"overflow", "99999999999999999999", 0, true}, // 1e20 ms is year 3e9: far future
		{"negative", "-5", 0, false},
		{"garbage", "soon", 0, false},
		{"NaN", "NaN", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := header.ParseReset(tt.value, now)
			if tt.name == "overflow" {
				if !ok || got <= 0 {
					t.Fatalf("ParseReset(%q) = %v, %v; want a huge positive duration", tt.value, got, ok)
				}
				return
			}
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseReset(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseCountRateLimit(t *testing.T) {
	tests := []struct {
		value string
		want  int64
		ok    bool
	}{
		{"5000", 5000, true},
		{"0", 0, true},
		{" 12 ", 12, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"12abc", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, ok := header.ParseCount(tt.value)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseCount(%q) = %d, %v; want %d, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseXRateLimit(t *testing.T) {
	tests := []struct {
		name string
		now  time.Time
		h    http.Header
		want header.Quota
		ok   bool
	}{
		{
			name: "github",
			now:  time.Unix(1372700873-30, 0),
			h: hdr("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999",
				"x-ratelimit-used", "1", "x-ratelimit-reset", "1372700873", "x-ratelimit-resource", "core"),
			want: header.Quota{Name: "requests", Unit: "requests", Limit: 5000, HasLimit: true, Remaining: 4999, HasRemaining: true, Reset: 30 * time.Second, HasReset: true},
			ok:   true,
		},
		{
			name: "sendgrid",
			now:  time.Unix(1392815263-10, 0),
			h:    hdr("X-RateLimit-Limit", "500", "X-RateLimit-Remaining", "499", "X-RateLimit-Reset", "1392815263"),
			want: header.Quota{Name: "requests", Unit: "requests", Limit: 500, HasLimit: true, Remaining: 499, HasRemaining: true, Reset: 10 * time.Second, HasReset: true},
			ok:   true,
		},
		{
			name: "discord reset-after preferred",
			now:  time.Unix(1470173000, 0),
			h: hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
				"X-RateLimit-Reset", "1470173023.123", "X-RateLimit-Reset-After", "64.57"),
			want: header.Quota{Name: "requests", Unit: "requests", Limit: 10, HasLimit: true, Remaining: 0, HasRemaining: true, Reset: 64570 * time.Millisecond, HasReset: true},
			ok:   true,
		},
		{
			name: "discord bad reset-after falls back to reset",
			now:  time.Unix(1470173000, 0),
			h:    hdr("X-RateLimit-Reset", "1470173023.123", "X-RateLimit-Reset-After", "-1"),
			want: header.Quota{Name: "requests", Unit: "requests", Reset: 23123 * time.Millisecond, HasReset: true},
			ok:   true,
		},
		{
			name: "x twitter",
			now:  time.Unix(1705420800-900, 0),
			h:    hdr("x-rate-limit-limit", "900", "x-rate-limit-remaining", "847", "x-rate-limit-reset", "1705420800"),
			want: header.Quota{Name: "requests", Unit: "requests", Limit: 900, HasLimit: true, Remaining: 847, HasRemaining: true, Reset: 15 * time.Minute, HasReset: true},
			ok:   true,
		},
		{
			name: "remaining without limit",
			h:    hdr("X-RateLimit-Remaining", "3"),
			want: header.Quota{Name: "requests", Unit: "requests", Remaining: 3, HasRemaining: true},
			ok:   true,
		},
		{
			name: "used gives remaining",
			h:    hdr("X-RateLimit-Limit", "60", "X-RateLimit-Used", "75"),
			want: header.Quota{Name: "requests", Unit: "requests", Limit: 60, HasLimit: true, Remaining: 0, HasRemaining: true},
			ok:   true,
		},
		{
			name: "only first line used",
			h:    hdr("X-RateLimit-Remaining", "3", "X-RateLimit-Remaining", "0"),
			want: header.Quota{Name: "requests", Unit: "requests", Remaining: 3, HasRemaining: true},
			ok:   true,
		},
		{
			name: "garbled everything",
			h: hdr("X-RateLimit-Limit", "-5", "X-RateLimit-Remaining", "99999999999999999999",
				"X-RateLimit-Reset", "NaN", "X-RateLimit-Reset-After", "Inf"),
			want: header.Quota{Name: "requests", Unit: "requests"},
			ok:   false,
		},
		{
			name: "huge value ignored",
			h:    hdr("X-RateLimit-Remaining", strings.Repeat("9", 300)),
			want: header.Quota{Name: "requests", Unit: "requests"},
			ok:   false,
		},
		{name: "absent", h: http.Header{}, want: header.Quota{Name: "requests", Unit: "requests"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := header.ParseXRateLimit(tt.h, tt.now)
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseXRateLimit = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseIETF(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		h    http.Header
		want []header.Quota
	}{
		{
			name: "-10 two policies, one remaining",
			h: hdr("RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`,
				"RateLimit", `"burst";r=50;t=30`),
			want: []header.Quota{
				{Name: "burst", Unit: "requests", Limit: 100, HasLimit: true, Remaining: 50, HasRemaining: true, Reset: 30 * time.Second, HasReset: true, Window: time.Minute},
				{Name: "daily", Unit: "requests", Limit: 1000, HasLimit: true, Window: 24 * time.Hour},
			},
		},
		{
			name: "-10 content-bytes with partition key",
			h:    hdr("RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`),
			want: []header.Quota{{Name: "peruser", Unit: "content-bytes", Limit: 65535, HasLimit: true, Window: 10 * time.Second, PartitionKey: "sdfjLJUOUA=="}},
		},
		{
			name: "-10 remaining with pk, no policy",
			h:    hdr("RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`),
			want: []header.Quota{{Name: "default", Unit: "requests", Remaining: 999, HasRemaining: true, PartitionKey: "dHJpYWwxMjEzMjM="}},
		},
		{
			name: "-10 ratelimit only",
			h:    hdr("RateLimit", `"default";r=50;t=30`),
			want: []header.Quota{{Name: "default", Unit: "requests", Remaining: 50, HasRemaining: true, Reset: 30 * time.Second, HasReset: true}},
		},
		{
			name: "-10 lines joined",
			h:    hdr("RateLimit-Policy", `"a";q=10`, "RateLimit-Policy", `"b";q=20`, "RateLimit", `"b";r=1`),
			want: []header.Quota{
				{Name: "a", Unit: "requests", Limit: 10, HasLimit: true},
				{Name: "b", Unit: "requests", Limit: 20, HasLimit: true, Remaining: 1, HasRemaining: true},
			},
		},
		{
			name: "-10 unit quirks",
			h:    hdr("RateLimit-Policy", `"a";q=10;qu="request","b";q=5;qu="bytes"`),
			want: []header.Quota{
				{Name: "a", Unit: "requests", Limit: 10, HasLimit: true},
				{Name: "b", Unit: "content-bytes", Limit: 5, HasLimit: true},
			},
		},
		{
			name: "-10 items missing required params or of the wrong type are skipped",
			h: hdr("RateLimit-Policy", `"a";w=10,"b";q="x",c;q=1,("d");q=1,"e";q=-1,"f";q=7;w=0`,
				"RateLimit", `"a";t=5,"g";r=1.5,"h";r=2;t=-3`),
			want: []header.Quota{
				{Name: "f", Unit: "requests", Limit: 7, HasLimit: true},
				{Name: "h", Unit: "requests", Remaining: 2, HasRemaining: true},
			},
		},
		{
			name: "-10 malformed field ignored whole",
			h:    hdr("RateLimit-Policy", `"a";q=10,,`, "RateLimit", `"a";r=1`),
			want: []header.Quota{{Name: "a", Unit: "requests", Remaining: 1, HasRemaining: true}},
		},
		{
			name: "-07 dictionary",
			h:    hdr("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=10"),
			want: []header.Quota{{Name: "default", Unit: "requests", Limit: 100, HasLimit: true, Remaining: 50, HasRemaining: true, Reset: 5 * time.Second, HasReset: true, Window: 10 * time.Second}},
		},
		{
			name: "-06 separate fields",
			h: hdr("RateLimit-Limit", "50", "RateLimit-Remaining", "49", "RateLimit-Reset", "50",
				"RateLimit-Policy", "10;w=1, 50;w=60"),
			want: []header.Quota{{Name: "default", Unit: "requests", Limit: 50, HasLimit: true, Remaining: 49, HasRemaining: true, Reset: 50 * time.Second, HasReset: true, Window: time.Minute}},
		},
		{
			name: "-06 lowercase as Resend sends",
			h:    http.Header{"Ratelimit-Limit": {"2"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"1"}},
			want: []header.Quota{{Name: "default", Unit: "requests", Limit: 2, HasLimit: true, Remaining: 0, HasRemaining: true, Reset: time.Second, HasReset: true}},
		},
		{
			name: "-06 policy does not match limit: no window",
			h:    hdr("RateLimit-Limit", "7", "RateLimit-Policy", "10;w=1, 50;w=60"),
			want: []header.Quota{{Name: "default", Unit: "requests", Limit: 7, HasLimit: true}},
		},
		{
			name: "over-long structured field ignored",
			h:    hdr("RateLimit", `"a";r=1`+strings.Repeat(`,"b";r=2`, 1000)),
			want: nil,
		},
		{
			name: "-10 canonical pk kept byte for byte",
			h:    hdr("RateLimit", `"default";r=1;pk=:dHJpYWwxMjEzMjM=:`),
			want: []header.Quota{{Name: "default", Unit: "requests", Remaining: 1, HasRemaining: true, PartitionKey: "dHJpYWwxMjEzMjM="}},
		},
		{name: "absent", h: http.Header{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := header.ParseIETF(tt.h, now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseIETF =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseIETFBoundsQuotas(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `";q=1`)
	}
	got := header.ParseIETF(hdr("RateLimit-Policy", b.String()), time.Unix(0, 0))
	if len(got) != header.MaxQuotas {
		t.Fatalf("got %d quotas; want the cap %d", len(got), header.MaxQuotas)
	}
}
