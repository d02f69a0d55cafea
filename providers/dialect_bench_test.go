package providers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle/header"
	"github.com/throttlekit/throttle/providers"
)

// benchSink keeps the compiler from discarding the parsed signal.
var benchSink header.Signal

// BenchmarkDialectsNoHeaders runs each dialect, then all of them, on a 200
// response without rate-limit fields: the common case, which should cost
// next to nothing.
func BenchmarkDialectsNoHeaders(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}}
	now := time.Unix(1700000000, 0)
	named := []struct {
		name string
		d    header.Dialect
	}{
		{"OpenAI", providers.OpenAI}, {"Anthropic", providers.Anthropic}, {"Shopify", providers.Shopify},
		{"GitHub", providers.GitHub}, {"Discord", providers.Discord}, {"Stripe", providers.Stripe},
		{"Salesforce", providers.Salesforce}, {"HubSpot", providers.HubSpot},
	}
	for _, n := range named {
		b.Run(n.name, func(b *testing.B) {
			b.ReportAllocs()
			var s header.Signal
			for b.Loop() {
				s = header.Signal{}
				n.d.Parse(http.StatusOK, h, now, &s)
			}
			benchSink = s
		})
	}
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		var s header.Signal
		for b.Loop() {
			s = header.Signal{}
			for _, d := range allDialects {
				d.Parse(http.StatusOK, h, now, &s)
			}
		}
		benchSink = s
	})
	b.Run("Parse/all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = header.Parse(http.StatusOK, h, now, 0, allDialects...)
		}
	})
}
