package providers

import (
	"net/http"
	"strings"
)

// ruleName returns the name of a preset's rule.
func ruleName(preset, rule string) string { return preset + "-" + rule }

// burstOf returns the default burst of a rule of the given rate: 1 % of the
// rate, at least 1 (see the Preset doc).
func burstOf(rate int) int { return max(1, rate/100) }

// withKey returns a Rule.Key partitioning by the caller's key k (when not
// nil) and then by part. A NUL separates the two so that no pair of keys
// can run together into the same string.
func withKey(k func(*http.Request) string, part func(*http.Request) string) func(*http.Request) string {
	if k == nil {
		return part
	}
	return func(r *http.Request) string { return k(r) + "\x00" + part(r) }
}

// hostIs reports whether host (from a URL, perhaps with a port) is one of
// patterns, compared as [throttle.Match] compares Host: without case, and
// without port unless the pattern has one.
func hostIs(host string, patterns []string) bool {
	for _, p := range patterns {
		h := host
		if !strings.Contains(p, ":") {
			if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
				h = h[:i]
			}
		}
		if strings.EqualFold(p, h) {
			return true
		}
	}
	return false
}
