package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Files names the TLS files of a node or a client.
type Files struct {
	// CertFile and KeyFile are a certificate (PEM, optionally followed by intermediate
	// CA certificates) and its private key.
	CertFile, KeyFile string
	// CAFile holds the CA certificates (PEM) that peers' certificates must chain to.
	CAFile string
}

// IsZero reports whether no file is named.
func (f Files) IsZero() bool { return f == Files{} }

// NodeCerts is a node's TLS material: its certificate and key, and the cluster CA that
// every other node's certificate must be signed by. Its methods build the *tls.Config
// of each kind of connection. It is immutable; the files are read once, by LoadNode.
type NodeCerts struct {
	cert tls.Certificate
	pool *x509.CertPool
}

// LoadNode reads a node's files (all three are required) and checks them together: the
// key belongs to the certificate, and the certificate is valid now, chains to a CA of
// CAFile and may serve as both server and client certificate. Every error names the
// file and the problem.
func LoadNode(f Files) (*NodeCerts, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, errors.New("tls: the certificate, key and CA files are all required")
	}
	pool, err := LoadCAPool(f.CAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %s and %s: %w", f.CertFile, f.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: %s: %w", f.CertFile, err)
		}
		cert.Leaf = leaf
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: pool, Intermediates: intermediates(cert.Certificate[1:]), KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return nil, fmt.Errorf("tls: %s does not verify against the CA of %s as a %s certificate: %w",
				f.CertFile, f.CAFile, usageName(usage), err)
		}
	}
	return &NodeCerts{cert: cert, pool: pool}, nil
}

// NotAfter is when the node's certificate expires.
func (n *NodeCerts) NotAfter() time.Time { return n.cert.Leaf.NotAfter }

// Subject is the common name of the node's certificate.
func (n *NodeCerts) Subject() string { return n.cert.Leaf.Subject.CommonName }

// HTTPServer is the configuration of the HTTPS API: TLS 1.2 or later (TLS 1.2 with
// CipherSuites only), HTTP/1.1 only (the
// caller keeps HTTP/2 off: the API's event streams take HTTP/1.1 connections over). A
// client certificate is verified against the CA when one is sent, and required with
// verifyIncoming.
func (n *NodeCerts) HTTPServer(verifyIncoming bool) *tls.Config {
	c := n.serverBase(verifyIncoming)
	c.NextProtos = []string{"http/1.1"}
	return c
}

// GRPCServer is the configuration of the Nacos gRPC API, like HTTPServer's without the
// application protocol (gRPC's credentials add h2).
func (n *NodeCerts) GRPCServer(verifyIncoming bool) *tls.Config {
	return n.serverBase(verifyIncoming)
}

// CipherSuites are the TLS 1.2 suites Roster offers and accepts, on every TLS 1.2
// configuration of this package: ECDHE key exchange (forward secrecy) with an AEAD
// cipher only, AES-GCM or ChaCha20-Poly1305. Go's defaults add the CBC suites with
// HMAC-SHA1 (and, without ECDHE, RSA key exchange), which no client of Roster needs.
// TLS 1.3's suites are all AEAD and are not configurable.
var CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// cipherSuites is a copy of CipherSuites for one configuration.
func cipherSuites() []uint16 { return append([]uint16(nil), CipherSuites...) }

// serverBase is the configuration of the HTTPS and Nacos gRPC listeners.
func (n *NodeCerts) serverBase(verifyIncoming bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if verifyIncoming {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites(),
		Certificates: []tls.Certificate{n.cert},
		ClientAuth:   auth,
		ClientCAs:    n.pool,
	}
}

// RaftServer is the configuration of the Raft listener: mutual TLS 1.3 — a peer that
// sends no certificate signed by the CA fails the handshake, before any RPC is read.
func (n *NodeCerts) RaftServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{n.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    n.pool,
	}
}

// RaftClient is the configuration of the Raft dialer: TLS 1.3, presenting the node's
// certificate, and accepting a peer whose certificate chains to the CA (the chain only,
// see PeerClient).
func (n *NodeCerts) RaftClient() *tls.Config {
	c := n.PeerClient()
	c.MinVersion = tls.VersionTLS13
	return c
}

// PeerClient is the configuration of requests to other nodes' HTTPS APIs (forwarding to
// the leader, joins, state checks): TLS 1.2 or later with CipherSuites, presenting the node's certificate
// as a client certificate, and accepting a server whose certificate chains to the
// cluster CA. The server's name is not compared with the address dialed: every
// certificate of the CA is a cluster member's, and the addresses nodes advertise are
// often IP addresses or names that certificates do not list (docs/security.md).
func (n *NodeCerts) PeerClient() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites(),
		Certificates: []tls.Certificate{n.cert},
		RootCAs:      n.pool,
		// The standard verification, which includes the host name, is replaced by
		// VerifyConnection's: the chain to the cluster CA, for a server's use.
		InsecureSkipVerify: true,
		VerifyConnection:   verifyChain(n.pool, x509.ExtKeyUsageServerAuth),
	}
}

// verifyChain checks that the peer's certificate chains to a CA of pool for usage, at
// the current time, whatever its names.
func verifyChain(pool *x509.CertPool, usage x509.ExtKeyUsage) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the peer sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage},
		})
		if err != nil {
			return fmt.Errorf("tls: the peer's certificate is not signed by the cluster CA: %w", err)
		}
		return nil
	}
}

// ClientConfig is the configuration of a client of the API (the CLI, the Go client,
// roster bench): TLS 1.2 or later with CipherSuites, the server's certificate verified against the CAs of
// f.CAFile (the system's when empty) including its host name, and f.CertFile and
// f.KeyFile, when given (both or neither), presented as the client certificate.
func ClientConfig(f Files) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: cipherSuites()}
	if f.CAFile != "" {
		pool, err := LoadCAPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %s and %s: %w", f.CertFile, f.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("tls: a client certificate needs both its certificate and its key file")
	}
	return c, nil
}

// LoadCAPool reads every certificate of a PEM file into a pool; a file without any is an
// error. Several CAs in one file are all trusted (during a CA rotation, say).
func LoadCAPool(file string) (*x509.CertPool, error) {
	certs, err := readCerts(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func intermediates(der [][]byte) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, d := range der {
		if c, err := x509.ParseCertificate(d); err == nil {
			pool.AddCert(c)
		}
	}
	return pool
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server"
	}
	return "client"
}
