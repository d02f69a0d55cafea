package throttletest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
	"github.com/throttlekit/throttle/throttletest"
)

func TestOpenAIAnswers(t *testing.T) {
	h, fc := newHandler(t, throttletest.OpenAI(throttletest.OpenAIConfig{RPM: 60, TPM: 1000}))
	body := strings.Repeat("x", 396) // 100 tokens by the default count
	json := http.Header{"Content-Type": {"application/json"}}
	resp := serve(h, "POST", "/v1/chat/completions", json, body)
	want := map[string]string{
		"X-Ratelimit-Limit-Requests": "60", "X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "1s",
		"X-Ratelimit-Limit-Tokens": "1000", "X-Ratelimit-Remaining-Tokens": "900", "X-Ratelimit-Reset-Tokens": "6s",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s %q, want %q", k, got, v)
		}
	}
	sig := header.Parse(resp.StatusCode, resp.Header, fc.Now(), 0, providers.OpenAI)
	if q, ok := sig.Quota("tokens"); !ok || q.Limit != 1000 || q.Remaining != 900 || q.Reset != 6*time.Second {
		t.Errorf("the client reads tokens %+v", q)
	}
	for range 9 {
		serve(h, "POST", "/v1/chat/completions", json, body)
	}
	resp = serve(h, "POST", "/v1/chat/completions", json, body)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("11th: status %d, want 429", resp.StatusCode)
	}
	if got := resp.Header.Get("X-Ratelimit-Remaining-Tokens"); got != "0" {
		t.Errorf("remaining tokens %q, want 0", got)
	}
	if got := resp.Header.Get("X-Ratelimit-Reset-Tokens"); got != "1m0s" {
		t.Errorf("reset tokens %q, want 1m0s", got)
	}
	e, _ := decode(t, resp)["error"].(map[string]any)
	if e["type"] != "tokens" || e["code"] != "rate_limit_exceeded" {
		t.Errorf("error %v, want type tokens, code rate_limit_exceeded", e)
	}
	// 6 s later 100 tokens are back: one more fits.
	fc.Advance(6 * time.Second)
	if resp := serve(h, "POST", "/v1/chat/completions", json, body); resp.StatusCode != http.StatusOK {
		t.Errorf("6 s later: status %d, want 200", resp.StatusCode)
	}
	if rep := h.Report(); rep.Refused[throttletest.OpenAITokens] != 1 {
		t.Errorf("refused %v", rep.Refused)
	}
}

func TestOpenAIDurations(t *testing.T) {
	h, _ := newHandler(t, throttletest.OpenAI(throttletest.OpenAIConfig{RPM: 3000}))
	resp := serve(h, "GET", "/v1/models", nil, "")
	// One request of 3,000/min drains in 20 ms.
	if got := resp.Header.Get("X-Ratelimit-Reset-Requests"); got != "20ms" {
		t.Errorf("reset %q, want 20ms", got)
	}
	if resp.Header.Get("X-Ratelimit-Limit-Tokens") != "" {
		t.Error("tokens reported without a TPM")
	}
}

func TestOpenAIWithoutRPM(t *testing.T) {
	_, err := throttletest.NewHandler(throttletest.OpenAI(throttletest.OpenAIConfig{}))
	var re *throttle.RuleError
	if !errors.As(err, &re) || re.Rule != throttletest.OpenAIRequests || re.Field != "Limit.Rate" {
		t.Fatalf("error %v, want a RuleError naming openai-requests and Limit.Rate", err)
	}
}
