package middleware_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/throttlekit/throttle/middleware"
)

// FuzzForwarded holds the forwarding parsers and ClientIP to their
// promises on any input: no panic, at most 64 hops, and a client that is
// the untrusted peer itself or one of the header's hops.
func FuzzForwarded(f *testing.F) {
	for _, s := range []string{
		"198.51.100.1", "1.2.3.4, 10.0.0.1", `for="[2001:db8::1]:4711";proto=https`,
		"for=unknown, for=_hidden", `for="\"quoted,\";x"`, "[::1]:80", ",,,", strings.Repeat("10.0.0.1,", 100),
	} {
		f.Add(s, "10.1.2.3:80")
		f.Add(s, "203.0.113.9:1")
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	key := middleware.ClientIP(trusted...)
	f.Fuzz(func(t *testing.T, v, remote string) {
		xff := middleware.XForwardedFor([]string{v})
		fw := middleware.ForwardedFor([]string{v})
		if len(xff) > 64 || len(fw) > 64 {
			t.Fatalf("%d and %d hops, want at most 64", len(xff), len(fw))
		}
		for _, r := range []struct {
			header string
			hops   []netip.Addr
		}{{"X-Forwarded-For", xff}, {"Forwarded", fw}} {
			req := get("/", r.header, v)
			req.RemoteAddr = remote
			got := key(req)
			peer, err := netip.ParseAddrPort(remote)
			if err != nil {
				continue
			}
			p := peer.Addr().Unmap().WithZone("")
			if got == keyOf(p) {
				continue
			}
			if !trusted[0].Contains(p) {
				t.Fatalf("untrusted peer %v: client %q, want the peer", p, got)
			}
			found := false
			for _, h := range r.hops {
				found = found || keyOf(h) == got
			}
			if !found {
				t.Fatalf("%s %q: client %q is neither the peer nor a hop %v", r.header, v, got, r.hops)
			}
		}
	})
}

// keyOf is ClientIP's key of an address: an IPv6 one's /64.
func keyOf(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
