package tlsutil

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pki is a CA directory with node certificates.
type pki struct {
	dir string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	return pki{dir: mustCA(t, CAOptions{})}
}

func (p pki) caFile() string { return filepath.Join(p.dir, CAFileName) }

func (p pki) files(t *testing.T, node string) Files {
	t.Helper()
	cert, key := NodeFiles(p.dir, node)
	if _, err := os.Stat(cert); err != nil {
		mustCert(t, CertOptions{Dir: p.dir, Node: node})
	}
	return Files{CertFile: cert, KeyFile: key, CAFile: p.caFile()}
}

func (p pki) node(t *testing.T, name string) *NodeCerts {
	t.Helper()
	n, err := LoadNode(p.files(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// handshake runs a TLS handshake between a client and a server configuration over a
// loopback connection, then one byte each way (a TLS 1.3 server refuses a client's
// certificate after the client's handshake is done); it returns both sides' errors.
func handshake(t *testing.T, client, server *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(deadline)
		srv := tls.Server(conn, server)
		if err = srv.Handshake(); err == nil {
			if _, err = srv.Read(make([]byte, 1)); err == nil {
				_, err = srv.Write([]byte{2})
			}
		}
		done <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	cl := tls.Client(conn, client)
	if clientErr = cl.Handshake(); clientErr == nil {
		if _, clientErr = cl.Write([]byte{1}); clientErr == nil {
			_, clientErr = cl.Read(make([]byte, 1))
		}
	}
	_ = conn.Close()
	return clientErr, <-done
}

// forceCert makes a client send its certificate even to a server that asks for
// certificates of other CAs (Go's client otherwise sends none then).
func forceCert(c *tls.Config) *tls.Config {
	c = c.Clone()
	cert := c.Certificates[0]
	c.Certificates = nil
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return c
}

func withName(c *tls.Config, name string) *tls.Config {
	c = c.Clone()
	c.ServerName = name
	return c
}

// Which handshakes succeed between the configurations of a node, another node of the
// same CA, a node of another CA, and clients with and without certificates.
func TestConfigs_Handshakes(t *testing.T) {
	ours := newPKI(t)
	theirs := newPKI(t)
	n1, n2 := ours.node(t, "n1"), ours.node(t, "n2")
	stranger := theirs.node(t, "n1")
	noCert, err := ClientConfig(Files{CAFile: ours.caFile()})
	if err != nil {
		t.Fatal(err)
	}
	f := ours.files(t, "ops")
	withCert, err := ClientConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	foreign := theirs.files(t, "ops")
	foreign.CAFile = ours.caFile() // trusts our servers, presents a certificate of theirs
	foreignCert, err := ClientConfig(foreign)
	if err != nil {
		t.Fatal(err)
	}
	plainRaftClient := n2.RaftClient()
	plainRaftClient.Certificates = nil

	cases := []struct {
		name           string
		client, server *tls.Config
		ok             bool
	}{
		{"raft between members", n2.RaftClient(), n1.RaftServer(), true},
		{"raft client of another CA", stranger.RaftClient(), n1.RaftServer(), false},
		{"raft client of another CA that trusts ours", forceCert(func() *tls.Config { c := stranger.RaftClient(); c.VerifyConnection = nil; return c }()), n1.RaftServer(), false},
		{"raft client without a certificate", plainRaftClient, n1.RaftServer(), false},
		{"raft server of another CA", n2.RaftClient(), stranger.RaftServer(), false},
		{"raft client below TLS 1.3", func() *tls.Config {
			c := n2.RaftClient()
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}(), n1.RaftServer(), false},
		// Node to node: the chain counts, not the name dialed.
		{"peer https, any name", withName(n2.PeerClient(), "127.9.9.9"), n1.HTTPServer(false), true},
		{"peer https to another CA", n2.PeerClient(), stranger.HTTPServer(false), false},
		{"peer https, verify-incoming", n2.PeerClient(), n1.HTTPServer(true), true},
		// Clients verify the host name.
		{"client, name in the certificate", withName(noCert, "localhost"), n1.HTTPServer(false), true},
		{"client, name not in the certificate", withName(noCert, "roster.example"), n1.HTTPServer(false), false},
		{"client without a certificate, verify-incoming", withName(noCert, "localhost"), n1.HTTPServer(true), false},
		{"client with a certificate, verify-incoming", withName(withCert, "localhost"), n1.HTTPServer(true), true},
		// Go's client keeps a certificate the server's CAs did not sign to itself.
		{"client with a certificate of another CA", withName(foreignCert, "localhost"), n1.HTTPServer(false), true},
		{"client sending a certificate of another CA", forceCert(withName(foreignCert, "localhost")), n1.HTTPServer(false), false},
		{"client with a certificate of another CA, verify-incoming", withName(foreignCert, "localhost"), n1.HTTPServer(true), false},
		{"client sending a certificate of another CA, verify-incoming", forceCert(withName(foreignCert, "localhost")), n1.HTTPServer(true), false},
		{"client below TLS 1.2", func() *tls.Config {
			c := withName(noCert, "localhost")
			c.MinVersion, c.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
			return c
		}(), n1.HTTPServer(false), false},
		{"grpc, verify-incoming, no certificate", withName(noCert, "localhost"), n1.GRPCServer(true), false},
		{"grpc, verify-incoming, certificate", withName(withCert, "localhost"), n1.GRPCServer(true), true},
		{"grpc without a certificate", withName(noCert, "localhost"), n1.GRPCServer(false), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cerr, serr := handshake(t, tc.client, tc.server)
			if tc.ok && (cerr != nil || serr != nil) {
				t.Fatalf("handshake failed: client %v, server %v", cerr, serr)
			}
			if !tc.ok && cerr == nil && serr == nil {
				t.Fatal("handshake succeeded")
			}
		})
	}
	if got := n1.HTTPServer(false).NextProtos; len(got) != 1 || got[0] != "http/1.1" {
		t.Errorf("HTTPS server protocols %q, want http/1.1 only", got)
	}
	if n1.Subject() != "n1" || time.Until(n1.NotAfter()) < 364*24*time.Hour {
		t.Errorf("subject %q, expires %s", n1.Subject(), n1.NotAfter())
	}
}

// LoadNode refuses files that do not work together, naming the problem.
func TestLoadNode_Refusals(t *testing.T) {
	ours := newPKI(t)
	theirs := newPKI(t)
	good := ours.files(t, "n1")
	other := theirs.files(t, "n2")
	expiredDir := t.TempDir()
	caPEM, caKeyPEM, err := GenerateCA(10, time.Now().AddDate(0, 0, -5))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(expiredDir, CAFileName), caPEM, 0o644)
	_ = os.WriteFile(filepath.Join(expiredDir, CAKeyFileName), caKeyPEM, 0o600)
	mustCert(t, CertOptions{Dir: expiredDir, Node: "old", Days: 2, Now: time.Now().AddDate(0, 0, -5)})
	expCert, expKey := NodeFiles(expiredDir, "old")
	empty := filepath.Join(t.TempDir(), "empty.pem")
	_ = os.WriteFile(empty, []byte("not pem\n"), 0o644)

	cases := []struct {
		name string
		f    Files
		want string
	}{
		{"missing CA file name", Files{CertFile: good.CertFile, KeyFile: good.KeyFile}, "all required"},
		{"certificate of another CA", Files{CertFile: other.CertFile, KeyFile: other.KeyFile, CAFile: good.CAFile}, "does not verify against the CA"},
		{"key of another certificate", Files{CertFile: good.CertFile, KeyFile: other.KeyFile, CAFile: good.CAFile}, "private key does not match"},
		{"expired certificate", Files{CertFile: expCert, KeyFile: expKey, CAFile: filepath.Join(expiredDir, CAFileName)}, "expired"},
		{"CA file without certificates", Files{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: empty}, "holds no PEM certificate"},
		{"missing certificate", Files{CertFile: filepath.Join(ours.dir, "nope.pem"), KeyFile: good.KeyFile, CAFile: good.CAFile}, "nope.pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadNode(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// A CA file may hold several CAs (a rotation): certificates of either verify.
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	a, _ := os.ReadFile(good.CAFile)
	b, _ := os.ReadFile(other.CAFile)
	_ = os.WriteFile(bundle, append(a, b...), 0o644)
	for _, f := range []Files{good, other} {
		f.CAFile = bundle
		if _, err := LoadNode(f); err != nil {
			t.Errorf("with a CA bundle: %v", err)
		}
	}
	if _, err := ClientConfig(Files{CertFile: good.CertFile}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("client certificate without key: %v", err)
	}
	if _, err := ClientConfig(Files{CAFile: empty}); err == nil {
		t.Error("client CA file without certificates accepted")
	}
	if c, err := ClientConfig(Files{}); err != nil || c.RootCAs != nil || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("client without files: %+v %v", c, err)
	}
}

// TLS 1.2 is offered with ECDHE AEAD suites only: a client that offers only CBC suites
// (with HMAC-SHA1 or SHA-256) fails the handshake with the HTTPS and gRPC listeners,
// one that offers AES-GCM or ChaCha20-Poly1305 succeeds; the node's own clients offer
// nothing else either.
func TestConfigs_TLS12CipherSuites(t *testing.T) {
	ours := newPKI(t)
	n1, n2 := ours.node(t, "n1"), ours.node(t, "n2")
	client, err := ClientConfig(Files{CAFile: ours.caFile()})
	if err != nil {
		t.Fatal(err)
	}
	tls12 := func(c *tls.Config, suites ...uint16) *tls.Config {
		c = withName(c, "localhost")
		c.MinVersion, c.MaxVersion, c.CipherSuites = tls.VersionTLS12, tls.VersionTLS12, suites
		return c
	}
	cbc := []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
		tls.TLS_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_AES_256_CBC_SHA,
	}
	servers := map[string]*tls.Config{"https": n1.HTTPServer(false), "grpc": n1.GRPCServer(false)}
	for name, server := range servers {
		if cerr, serr := handshake(t, tls12(client, cbc...), server); cerr == nil && serr == nil {
			t.Errorf("%s: a TLS 1.2 client offering only CBC suites completed the handshake", name)
		}
		for _, suite := range CipherSuites {
			c := tls12(client, suite)
			var got uint16
			c.VerifyConnection = func(cs tls.ConnectionState) error { got = cs.CipherSuite; return nil }
			cerr, serr := handshake(t, c, server)
			if strings.Contains(tls.CipherSuiteName(suite), "_RSA_") {
				continue // the node's certificate is not an RSA one: only the ECDSA suites can be agreed
			}
			if cerr != nil || serr != nil {
				t.Errorf("%s: TLS 1.2 with %s: client %v, server %v", name, tls.CipherSuiteName(suite), cerr, serr)
			} else if got != suite {
				t.Errorf("%s: agreed %s, offered %s", name, tls.CipherSuiteName(got), tls.CipherSuiteName(suite))
			}
		}
		// A TLS 1.3 client still gets TLS 1.3.
		var version uint16
		c := withName(client, "localhost")
		c.VerifyConnection = func(cs tls.ConnectionState) error { version = cs.Version; return nil }
		if cerr, serr := handshake(t, c, server); cerr != nil || serr != nil || version != tls.VersionTLS13 {
			t.Errorf("%s: default client: version %x, client %v, server %v", name, version, cerr, serr)
		}
	}
	// The node's clients (peer requests, the CLI) offer no CBC suite: a server that
	// accepts only CBC fails their handshakes.
	cbcServer := n1.HTTPServer(false)
	cbcServer.MaxVersion, cbcServer.CipherSuites = tls.VersionTLS12, cbc
	for name, c := range map[string]*tls.Config{"peer": n2.PeerClient(), "client": withName(client, "localhost")} {
		if cerr, serr := handshake(t, c, cbcServer); cerr == nil && serr == nil {
			t.Errorf("%s client agreed a CBC suite", name)
		}
	}
	for _, s := range CipherSuites {
		name := tls.CipherSuiteName(s)
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20_POLY1305")) {
			t.Errorf("CipherSuites holds %s, not an ECDHE AEAD suite", name)
		}
	}
}
