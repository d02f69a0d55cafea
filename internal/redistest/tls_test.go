package redistest

import (
	"testing"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTLS())
	ctx := ctxT(t)

	if s.TLSConfig() == nil {
		t.Fatalf("TLSConfig() = nil for a WithTLS server")
	}
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET over TLS = %q, %v; want v", got, err)
	}

	plain := fastFail(s)
	plain.TLSConfig = nil
	if err := s.ClientWith(t, plain).Ping(ctx).Err(); err == nil {
		t.Fatalf("plaintext PING to the TLS port succeeded")
	}

	noCert := fastFail(s)
	noCert.TLSConfig.Certificates = nil
	if err := s.ClientWith(t, noCert).Ping(ctx).Err(); err == nil {
		t.Fatalf("TLS PING without a client certificate succeeded")
	}

	// Restart keeps TLS on the same port.
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS after restart: %v", err)
	}
}

func TestTLSConfigNilWithoutTLS(t *testing.T) {
	t.Parallel()
	if conf := Start(t).TLSConfig(); conf != nil {
		t.Fatalf("TLSConfig() = %v for a plaintext server, want nil", conf)
	}
}
