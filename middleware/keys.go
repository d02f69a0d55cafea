package middleware

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The key functions below are for Rule.Key: they return the raw identity
// of the client, which the Limiter hashes (SHA-256, 128 bits) before it
// names a bucket, so a secret never reaches memory maps' keys, Redis, logs
// or errors. Each is safe for concurrent use and never modifies the
// request.

// KeyHeader returns a Rule.Key partitioning by the value of header name,
// such as an account id: requests without it share one bucket.
func KeyHeader(name string) func(*http.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// APIKey returns a Rule.Key partitioning by an API key sent in header name
// (such as "Authorization" or "X-Api-Key"); a "Bearer " or "Basic "
// scheme before it is dropped, so the same key in either header shares a
// bucket. Requests without it share one bucket.
func APIKey(name string) func(*http.Request) string {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string {
		v := strings.TrimSpace(r.Header.Get(name))
		if scheme, rest, ok := strings.Cut(v, " "); ok && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic")) {
			v = strings.TrimSpace(rest)
		}
		return v
	}
}

// ClientIP returns a Rule.Key partitioning by the client's IP address. The
// address is the connection's peer (Request.RemoteAddr), unless the peer
// lies in one of the trusted proxies' prefixes: then the Forwarded header
// (RFC 7239, its "for" parameters), or without one X-Forwarded-For, is
// read from its last hop back, and the client is the first address that
// is not a trusted proxy. A header from an untrusted peer is never
// believed, so a client cannot pick its own bucket by sending one; an
// unreadable hop ends the walk at the last trusted address before it.
// Without trusted prefixes the peer's address is the key. An IPv6 client
// is keyed by its /64 (such as "2001:db8::/64"): one host holds a whole
// /64 and could otherwise take a fresh bucket per address.
func ClientIP(trusted ...netip.Prefix) func(*http.Request) string {
	ps := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		ps[i] = p.Masked()
	}
	return func(r *http.Request) string { return ipKey(clientIP(r, ps)) }
}

// ipKey returns the key of client address a: an IPv4 address as it is,
// an IPv6 one's /64; "" for the zero Addr.
func ipKey(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// clientIP is ClientIP's walk; the zero Addr for a peer that is no
// address (a test's RemoteAddr, a Unix socket).
func clientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := peerAddr(r.RemoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	var hops []netip.Addr
	if fw := r.Header.Values("Forwarded"); len(fw) > 0 {
		hops = ForwardedFor(fw)
	} else {
		hops = XForwardedFor(r.Header.Values("X-Forwarded-For"))
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := hops[i]
		if !h.IsValid() {
			break
		}
		client = h
		if !isTrusted(h, trusted) {
			break
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr returns the address of a RemoteAddr "host:port" (or a bare
// host), or the zero Addr.
func peerAddr(remote string) netip.Addr {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}
