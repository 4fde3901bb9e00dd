package servertest

import (
	"crypto/tls"
	"os"
	"sync"
	"testing"

	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/tlsutil"
)

// tlsPending marks a node configuration whose TLS files New creates (WithTLS).
const tlsPending = "\x00servertest: created by New"

// WithTLS runs every node with TLS (server.TLSConfig): New creates a CA and one
// certificate per node in the test's temporary directory (Cluster.TLS), and each Node's
// Client and URL speak HTTPS, trusting the CA and presenting a client certificate of it.
func WithTLS() Option {
	return func(c *server.Config) { c.TLS = server.TLSConfig{CAFile: tlsPending} }
}

// WithTLSVerifyIncoming is WithTLS with --tls-verify-incoming: the nodes' APIs require
// client certificates signed by the CA.
func WithTLSVerifyIncoming() Option {
	return func(c *server.Config) { c.TLS = server.TLSConfig{CAFile: tlsPending, VerifyIncoming: true} }
}

// TLS is a test cluster's TLS material: a CA in Dir (tlsutil's file names) and the
// certificates made with it.
type TLS struct {
	t testing.TB
	// Dir holds ca.pem, ca-key.pem and ID.pem, ID-key.pem of every certificate made.
	Dir string
	// CAFile is the CA certificate, for clients' --ca-file.
	CAFile string
	// ClientCertFile and ClientKeyFile are a client certificate ("client") of the CA.
	ClientCertFile, ClientKeyFile string
	// Client trusts the CA (and verifies host names) and presents the client certificate.
	Client *tls.Config

	mu sync.Mutex
}

// NewTLS creates a CA and a client certificate in a new temporary directory of t.
func NewTLS(t testing.TB) *TLS {
	t.Helper()
	dir := t.TempDir()
	caFile, _, err := tlsutil.CreateCA(tlsutil.CAOptions{Dir: dir})
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	x := &TLS{t: t, Dir: dir, CAFile: caFile}
	x.ClientCertFile, x.ClientKeyFile = x.files("client")
	x.Client, err = tlsutil.ClientConfig(tlsutil.Files{CAFile: caFile, CertFile: x.ClientCertFile, KeyFile: x.ClientKeyFile})
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	return x
}

// NodeConfig is the server TLS configuration of node id, whose certificate (valid for
// localhost, 127.0.0.1 and ::1) is made on first use.
func (x *TLS) NodeConfig(id string) server.TLSConfig {
	cert, key := x.files(id)
	return server.TLSConfig{CertFile: cert, KeyFile: key, CAFile: x.CAFile}
}

// files returns the certificate and key of name, created on first use.
func (x *TLS) files(name string) (cert, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	cert, key = tlsutil.NodeFiles(x.Dir, name)
	if _, err := os.Stat(cert); err == nil {
		return cert, key
	}
	if _, _, err := tlsutil.CreateCert(tlsutil.CertOptions{Dir: x.Dir, Node: name}); err != nil {
		x.t.Fatalf("servertest: %v", err)
	}
	return cert, key
}
