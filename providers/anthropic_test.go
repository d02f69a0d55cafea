package providers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

func TestAnthropicPreset(t *testing.T) {
	ctx := context.Background()
	anthropic := providers.AnthropicPreset(llm())
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"anthropic", providers.AnthropicPreset(providers.LLMConfig{RPM: 50}), map[string]throttle.Limit{
				"anthropic-requests": lim(50, time.Minute, 1),
			}},
		})
	})
	t.Run("optional rules absent", func(t *testing.T) {
		checkAbsent(t, providers.AnthropicPreset(providers.LLMConfig{RPM: 3}), "anthropic-input-tokens")
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"anthropic", anthropic, newReq(ctx, "POST", "https://api.anthropic.com/v1/messages", "{}"), []string{"anthropic-requests", "anthropic-input-tokens"}},
			{"anthropic other host", anthropic, newReq(ctx, "POST", "https://api.openai.com/v1/messages", "{}"), nil},
		})
	})
	t.Run("costs", func(t *testing.T) {
		own := providers.AnthropicPreset(providers.LLMConfig{RPM: 50, TPM: 1000, Tokens: func(*http.Request) int { return 77 }})
		checkCosts(t, []costCase{
			{"caller's estimate", own, "anthropic-input-tokens", newReq(ctx, "POST", "https://api.anthropic.com/v1/messages", "{}"), 77},
		})
	})
}

func TestAnthropicDialect(t *testing.T) {
	checkDialects(t, []dialectCase{
		{
			name: "anthropic fixture", dialect: providers.Anthropic, status: 200, now: time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC),
			h: hdr("anthropic-ratelimit-requests-limit", "1000", "anthropic-ratelimit-requests-remaining", "999",
				"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z", "anthropic-ratelimit-input-tokens-limit", "80000"),
			want: header.Signal{Dialect: "anthropic", Quotas: []header.Quota{
				q("requests", "requests", 1000, 999, 59*time.Second),
				{Name: "input-tokens", Unit: "tokens", Limit: 80000, HasLimit: true},
			}},
		},
		{
			name: "anthropic 429 retry-after and past reset", dialect: providers.Anthropic, status: 429, now: time.Date(2025, 8, 21, 13, 0, 0, 0, time.UTC),
			h: hdr("retry-after", "20", "anthropic-ratelimit-output-tokens-remaining", "0",
				"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:40:59Z", "anthropic-ratelimit-tokens-reset", "tomorrow"),
			want: header.Signal{Limited: true, RetryAfter: 20 * time.Second, HasRetryAfter: true, Dialect: "anthropic",
				Quotas: []header.Quota{{Name: "output-tokens", Unit: "tokens", Remaining: 0, HasRemaining: true, HasReset: true}}},
		},
	})
}

func TestParseRFC3339Reset(t *testing.T) {
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"2025-08-21T12:40:59Z", 59 * time.Second, true},
		{"2025-08-21T14:40:59.5+02:00", 59500 * time.Millisecond, true},
		{"2025-08-21T12:39:00Z", 0, true},
		{"2025-08-21 12:40:59", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := providers.ParseRFC3339Reset(tt.in, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseRFC3339Reset(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzAnthropicReset(f *testing.F) {
	for _, s := range []string{"2025-08-21T12:40:59Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2025-08-21T12:40:59.999999999-23:59", "bogus"} {
		f.Add(s, "999")
	}
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, reset, count string) {
		if d, ok := providers.ParseRFC3339Reset(reset, now); d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRFC3339Reset(%q) = %v, %v", reset, d, ok)
		}
		h := http.Header{"Anthropic-Ratelimit-Tokens-Reset": {reset}, "Anthropic-Ratelimit-Tokens-Remaining": {count}}
		checkDialectSignal(t, header.Parse(429, h, now, time.Minute, providers.Anthropic), time.Minute)
	})
}
