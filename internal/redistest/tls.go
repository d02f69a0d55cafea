package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsFiles are the PEM files handed to redis-server.
type tlsFiles struct {
	caCert, serverCert, serverKey string
}

// certPair is a generated certificate with its key.
type certPair struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// genTLS creates a throwaway CA, a server certificate for 127.0.0.1/localhost
// and a client certificate, writes the server side to dir and returns the
// client configuration. Everything is ECDSA P-256 and valid for a day: it
// only has to outlive one test binary.
func genTLS(dir string) (tlsFiles, *tls.Config, error) {
	ca, err := newCert("redistest CA", nil, func(c *x509.Certificate) {
		c.IsCA = true
		c.BasicConstraintsValid = true
		c.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	})
	if err != nil {
		return tlsFiles{}, nil, err
	}
	server, err := newCert("127.0.0.1", ca, func(c *x509.Certificate) {
		c.KeyUsage = x509.KeyUsageDigitalSignature
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		c.DNSNames = []string{"localhost"}
	})
	if err != nil {
		return tlsFiles{}, nil, err
	}
	client, err := newCert("redistest client", ca, func(c *x509.Certificate) {
		c.KeyUsage = x509.KeyUsageDigitalSignature
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	if err != nil {
		return tlsFiles{}, nil, err
	}

	files := tlsFiles{
		caCert:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "server.crt"),
		serverKey:  filepath.Join(dir, "server.key"),
	}
	serverKeyDER, err := x509.MarshalPKCS8PrivateKey(server.key)
	if err != nil {
		return tlsFiles{}, nil, fmt.Errorf("redistest: marshal server key: %w", err)
	}
	for path, block := range map[string]*pem.Block{
		files.caCert:     {Type: "CERTIFICATE", Bytes: ca.der},
		files.serverCert: {Type: "CERTIFICATE", Bytes: server.der},
		files.serverKey:  {Type: "PRIVATE KEY", Bytes: serverKeyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return tlsFiles{}, nil, fmt.Errorf("redistest: write %s: %w", path, err)
		}
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		ServerName: "127.0.0.1",
		Certificates: []tls.Certificate{{
			Certificate: [][]byte{client.der},
			PrivateKey:  client.key,
			Leaf:        client.cert,
		}},
	}
	return files, conf, nil
}

// newCert generates a key and a certificate signed by parent, or self-signed
// when parent is nil.
func newCert(cn string, parent *certPair, customize func(*x509.Certificate)) (*certPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: generate key for %s: %w", cn, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("redistest: serial for %s: %w", cn, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"throttle redistest"}},
		NotBefore:    now.Add(-time.Hour), // tolerate small clock skew
		NotAfter:     now.Add(24 * time.Hour),
	}
	customize(tmpl)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: create certificate %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("redistest: parse certificate %s: %w", cn, err)
	}
	return &certPair{cert: cert, der: der, key: key}, nil
}
