package header_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

// benchDialects is the dialect set a typical user passes: every dialect
// the providers package exports.
var benchDialects = []header.Dialect{providers.OpenAI, providers.Anthropic, providers.Shopify, providers.GitHub,
	providers.Discord, providers.Stripe, providers.Salesforce, providers.HubSpot}

// benchSink keeps the compiler from discarding the parsed signal.
var benchSink header.Signal

func benchParse(b *testing.B, status int, h http.Header, dialects ...header.Dialect) {
	b.Helper()
	now := time.Unix(1372700833, 0)
	b.ReportAllocs()
	for b.Loop() {
		benchSink = header.Parse(status, h, now, 0, dialects...)
	}
}

// BenchmarkParseNoHeaders is the common case (issue 10): a response
// that says nothing about rate limits, alone and among the headers a real
// API response carries.
func BenchmarkParseNoHeaders(b *testing.B) {
	bare := http.Header{"Content-Type": {"application/json"}}
	typical := http.Header{
		"Content-Type":              {"application/json; charset=utf-8"},
		"Content-Length":            {"1234"},
		"Date":                      {"Mon, 05 Aug 2019 09:27:05 GMT"},
		"Server":                    {"nginx"},
		"Cache-Control":             {"no-cache, no-store"},
		"Vary":                      {"Accept-Encoding"},
		"X-Request-Id":              {"req_0123456789abcdef"},
		"Strict-Transport-Security": {"max-age=63072000"},
	}
	b.Run("content-type", func(b *testing.B) { benchParse(b, http.StatusOK, bare) })
	b.Run("content-type/openai", func(b *testing.B) { benchParse(b, http.StatusOK, bare, providers.OpenAI) })
	b.Run("content-type/dialects", func(b *testing.B) { benchParse(b, http.StatusOK, bare, benchDialects...) })
	b.Run("typical", func(b *testing.B) { benchParse(b, http.StatusOK, typical) })
	b.Run("typical/dialects", func(b *testing.B) { benchParse(b, http.StatusOK, typical, benchDialects...) })
}

// BenchmarkParseXRateLimit is a GitHub response: X-RateLimit-* with
// an epoch reset and a resource.
func BenchmarkParseXRateLimit(b *testing.B) {
	h := http.Header{
		"Content-Type":          {"application/json; charset=utf-8"},
		"X-Ratelimit-Limit":     {"5000"},
		"X-Ratelimit-Remaining": {"4999"},
		"X-Ratelimit-Used":      {"1"},
		"X-Ratelimit-Reset":     {"1372700873"},
		"X-Ratelimit-Resource":  {"core"},
	}
	b.Run("standard", func(b *testing.B) { benchParse(b, http.StatusOK, h) })
	b.Run("dialects", func(b *testing.B) { benchParse(b, http.StatusOK, h, benchDialects...) })
}

// BenchmarkParseIETF is a response in the -10 form of the IETF
// draft: two policies and their RateLimit items.
func BenchmarkParseIETF(b *testing.B) {
	h := http.Header{
		"Content-Type":     {"application/json"},
		"Ratelimit-Policy": {`"burst";q=100;w=60,"daily";q=1000;w=86400`},
		"Ratelimit":        {`"burst";r=50;t=30,"daily";r=999;t=3600`},
	}
	b.Run("standard", func(b *testing.B) { benchParse(b, http.StatusOK, h) })
	b.Run("dialects", func(b *testing.B) { benchParse(b, http.StatusOK, h, benchDialects...) })
}
