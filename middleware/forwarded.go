package middleware

import (
	"net"
	"net/netip"
	"strings"
)

// maxHops bounds the hops read from the forwarding headers: a request
// crosses a handful of proxies, and a header of thousands of addresses is
// an attack on the parser, not a path.
const maxHops = 64

// XForwardedFor returns the hops of X-Forwarded-For field values, in
// order (the client first, the last proxy last); a hop that is no IP
// address (optionally with a port, IPv6 in brackets) is the zero Addr. At
// most the last 64 hops are returned. It never fails: what it cannot read
// it marks.
func XForwardedFor(values []string) []netip.Addr {
	var hops []netip.Addr
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			hops = append(hops, parseHop(strings.TrimSpace(part)))
		}
	}
	return lastHops(hops)
}

// ForwardedFor returns the "for" parameters of Forwarded field values (RFC
// 7239), one per forwarded element, in order; an element without a "for",
// or whose node is no IP address ("unknown", an obfuscated "_name"), is
// the zero Addr. At most the last 64 are returned. Quoted strings may hold
// commas and semicolons; it never fails.
func ForwardedFor(values []string) []netip.Addr {
	var hops []netip.Addr
	for _, v := range values {
		for _, elem := range splitQuoted(v, ',') {
			var hop netip.Addr
			for _, pair := range splitQuoted(elem, ';') {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "for") {
					continue
				}
				hop = parseHop(unquote(strings.TrimSpace(val)))
			}
			hops = append(hops, hop)
		}
	}
	return lastHops(hops)
}

func lastHops(hops []netip.Addr) []netip.Addr {
	if len(hops) > maxHops {
		return hops[len(hops)-maxHops:]
	}
	return hops
}

// parseHop reads one node: an address, "addr:port", "[v6]" or
// "[v6]:port"; the zero Addr for anything else.
func parseHop(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote returns a quoted-string's content, its escapes undone; other
// values as they are.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
