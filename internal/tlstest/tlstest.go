// Package tlstest creates throw-away CAs and server certificates for tests of TLS
// clients (the HTTPS, TLS and GRPC health checks).
package tlstest

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"github.com/rosterhq/roster/tlsutil"
)

// CA is a test certificate authority.
type CA struct {
	// PEM is the CA certificate, PEM-encoded.
	PEM  string
	cert *x509.Certificate
	key  crypto.Signer
}

// NewCA creates a CA valid for two days.
func NewCA(t testing.TB) *CA {
	t.Helper()
	certPEM, keyPEM, err := tlsutil.GenerateCA(2, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(mustBlock(t, certPEM))
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(mustBlock(t, keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return &CA{PEM: string(certPEM), cert: cert, key: k.(crypto.Signer)}
}

// ServerConfig returns a server configuration with a certificate of the CA valid for
// the names and for 127.0.0.1 and ::1, and the certificate's expiry.
func (ca *CA) ServerConfig(t testing.TB, dnsNames ...string) (*tls.Config, time.Time) {
	t.Helper()
	certPEM, keyPEM, err := tlsutil.GenerateCert(ca.cert, ca.key, "server", dnsNames,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, 1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}, pair.Leaf.NotAfter
}

func mustBlock(t testing.TB, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("tlstest: no PEM block")
	}
	return blk.Bytes
}
