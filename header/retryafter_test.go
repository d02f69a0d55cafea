package header_test

import (
	"math"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(1994, time.November, 6, 8, 49, 0, 0, time.UTC)
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"delay seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"whitespace", "  7 ", 7 * time.Second, true},
		{"shopify float", "2.0", 2 * time.Second, true},
		{"discord header integer", "65", 65 * time.Second, true},
		{"fraction", "0.25", 250 * time.Millisecond, true},
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
		{"RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", 37 * time.Second, true},
		{"asctime", "Sun Nov  6 08:49:37 1994", 37 * time.Second, true},
		{"date in the past", "Fri, 31 Dec 1993 23:59:59 GMT", 0, true},
		{"year 9999 saturates", "Fri, 31 Dec 9999 23:59:59 GMT", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Sub(now), true},
		{"overflow saturates", "99999999999999999999", time.Duration(math.MaxInt64), true},
		{"empty", "", 0, false},
		{"negative", "-1", 0, false},
		{"plus sign", "+5", 0, false},
		{"exponent", "1e3", 0, false},
		{"NaN", "NaN", 0, false},
		{"Inf", "Inf", 0, false},
		{"hex", "0x10", 0, false},
		{"leading dot", ".5", 0, false},
		{"two dots", "1.2.3", 0, false},
		{"garbage", "soon", 0, false},
		{"unit suffix", "5s", 0, false},
		{"too long", "1" + string(make([]byte, 300)), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := header.ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRetryAfterMillis(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"openai", "10", 10 * time.Millisecond, true},
		{"fraction", "1500.5", 1500500 * time.Microsecond, true},
		{"zero", "0", 0, true},
		{"negative", "-10", 0, false},
		{"date is not millis", "Sun, 06 Nov 1994 08:49:37 GMT", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := header.ParseRetryAfterMillis(tt.value)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseRetryAfterMillis(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseShouldRetryHint(t *testing.T) {
	tests := []struct {
		value string
		want  header.RetryHint
	}{
		{"true", header.RetryHintRetry},
		{"TRUE", header.RetryHintRetry},
		{" false ", header.RetryHintDoNotRetry},
		{"", header.RetryHintNone},
		{"yes", header.RetryHintNone},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			if got := header.ParseShouldRetry(tt.value); got != tt.want {
				t.Fatalf("ParseShouldRetry(%q) = %v; want %v", tt.value, got, tt.want)
			}
		})
	}
}

func TestSecondsToDurationRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		sec  float64
		want time.Duration
	}{
		{"NaN", math.NaN(), 0},
		{"+Inf", math.Inf(1), time.Duration(math.MaxInt64)},
		{"-Inf", math.Inf(-1), 0},
		{"negative", -3, 0},
		{"rounds", 0.012, 12 * time.Millisecond},
		{"just below range", float64(math.MaxInt64) / 1e9, time.Duration(math.MaxInt64)},
		{"huge", 1e300, time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := header.SecondsToDuration(tt.sec); got != tt.want {
				t.Fatalf("SecondsToDuration(%v) = %v; want %v", tt.sec, got, tt.want)
			}
		})
	}
}
