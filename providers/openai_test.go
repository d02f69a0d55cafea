package providers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestOpenAIPreset(t *testing.T) {
	ctx := context.Background()
	openai := providers.OpenAIPreset(llm())
	m := time.Minute
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"openai", openai, map[string]throttle.Limit{
				"openai-requests": lim(500, m, 8), "openai-tokens": lim(30000, m, 30000),
			}},
		})
	})
	t.Run("optional rules absent", func(t *testing.T) {
		checkAbsent(t, providers.OpenAIPreset(providers.LLMConfig{RPM: 3}), "openai-tokens")
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"openai", openai, newReq(ctx, "POST", "https://api.openai.com/v1/chat/completions", "{}"), []string{"openai-requests", "openai-tokens"}},
		})
	})
	t.Run("costs", func(t *testing.T) {
		checkCosts(t, []costCase{
			{"openai estimate: body/4", openai, "openai-tokens", newReq(ctx, "POST", "https://api.openai.com/v1/chat/completions", strings.Repeat("a", 400)), 101},
			{"openai estimate: no body", openai, "openai-tokens", newReq(ctx, "GET", "https://api.openai.com/v1/models", ""), 1},
		})
	})
}

func TestOpenAIDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "openai docs example", dialect: providers.OpenAI, status: 200,
			h: hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			want: header.Signal{Dialect: "openai", Quotas: []header.Quota{
				q("requests", "requests", 60, 59, time.Second),
				q("tokens", "tokens", 150000, 149984, 6*time.Minute),
			}},
		},
		{
			name: "openai 429 with retry-after-ms and should-retry", dialect: providers.OpenAI, status: 429,
			h: hdr("retry-after-ms", "12", "retry-after", "1", "x-should-retry", "true",
				"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "12ms"),
			want: header.Signal{Limited: true, RetryAfter: 12 * time.Millisecond, HasRetryAfter: true, ShouldRetry: header.RetryHintRetry, Dialect: "openai",
				Quotas: []header.Quota{{Name: "tokens", Unit: "tokens", Remaining: 0, HasRemaining: true, Reset: 12 * time.Millisecond, HasReset: true}}},
		},
		{
			name: "openai usage based variant and garbled reset", dialect: providers.OpenAI, status: 200,
			h: hdr("x-ratelimit-remaining-tokens_usage_based", "10", "x-ratelimit-reset-tokens_usage_based", "9ms",
				"x-ratelimit-reset-requests", "soon"),
			want: header.Signal{Dialect: "openai", Quotas: []header.Quota{{Name: "tokens_usage_based", Unit: "tokens", Remaining: 10, HasRemaining: true, Reset: 9 * time.Millisecond, HasReset: true}}},
		},
	})
}

func TestParseOpenAIDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1s", time.Second, true},
		{"6m0s", 6 * time.Minute, true},
		{"12ms", 12 * time.Millisecond, true},
		{"9ms", 9 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"0.5s", 500 * time.Millisecond, true},
		{"20", 20 * time.Second, true},
		{"1d", 24 * time.Hour, true},
		{"3us", 3 * time.Microsecond, true},
		{"3µs", 3 * time.Microsecond, true},
		{"7ns", 7, true},
		{" 2m ", 2 * time.Minute, true},
		{"99999999999999999999h", time.Duration(1<<63 - 1), true},
		{"", 0, false},
		{"s", 0, false},
		{"-1s", 0, false},
		{"1x", 0, false},
		{"1.2.3s", 0, false},
		{".5s", 0, false},
		{"1 s", 0, false},
		{"NaNs", 0, false},
		{strings.Repeat("1s", 200), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := providers.ParseOpenAIDuration(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseOpenAIDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzOpenAIDuration(f *testing.F) {
	for _, s := range []string{"1s", "6m0s", "12ms", "1h2m3.5s", "20", "1d", "3µs", "-1s", "99999999999999999999h", ".", "1..s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := providers.ParseOpenAIDuration(v)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseOpenAIDuration(%q) = %v, %v", v, d, ok)
		}
		h := http.Header{"X-Ratelimit-Reset-Tokens": {v}, "X-Ratelimit-Remaining-Tokens": {v}}
		checkDialectSignal(t, header.Parse(429, h, time.Unix(0, 0), time.Minute, providers.OpenAI), time.Minute)
	})
}
