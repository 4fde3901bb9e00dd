// Package tlsutil creates, loads and applies Roster's TLS material: a cluster CA, node
// certificates signed by it (ECDSA P-256, usable as server and client certificates), and
// the *tls.Config of every connection a node makes or accepts — the HTTPS API, the
// mutual-TLS Raft transport, node-to-node HTTPS requests — and of the CLI and Go client.
//
// It depends on the standard library only, so that a client program may use it without
// pulling in anything of the server.
package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"
)

// Validity defaults and bounds, in days.
const (
	// DefaultCADays is a new CA's validity: five years.
	DefaultCADays = 5 * 365
	// DefaultCertDays is a new node certificate's validity: one year.
	DefaultCertDays = 365
	// MaxDays bounds --days: a hundred years.
	MaxDays = 100 * 365
)

// File names in a TLS directory.
const (
	CAFileName    = "ca.pem"
	CAKeyFileName = "ca-key.pem"
)

// DefaultDNSNames and DefaultIPs are in every node certificate, beside the names and
// addresses asked for (as consul tls cert create does), so that a node is reachable as
// localhost on its own machine.
var (
	DefaultDNSNames = []string{"localhost"}
	DefaultIPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// MaxNodeLen bounds a node name of CreateCert.
const MaxNodeLen = 64

// clockSkew backdates every certificate, so that a machine whose clock is a little
// behind accepts it at once.
const clockSkew = time.Minute

// CAFiles returns the paths of the CA certificate and key in dir.
func CAFiles(dir string) (cert, key string) {
	return filepath.Join(dir, CAFileName), filepath.Join(dir, CAKeyFileName)
}

// NodeFiles returns the paths of node's certificate and key in dir: NODE.pem and
// NODE-key.pem.
func NodeFiles(dir, node string) (cert, key string) {
	return filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem")
}

// CAOptions configures CreateCA.
type CAOptions struct {
	// Dir receives ca.pem and ca-key.pem; it is created (0700) when missing.
	Dir string
	// Days is the validity (0: DefaultCADays).
	Days int
	// Force replaces existing files; without it CreateCA refuses to overwrite any.
	Force bool
	// Now is the issue time (zero: time.Now()).
	Now time.Time
}

// CreateCA writes a new CA certificate (0644) and its ECDSA P-256 key (0600) to
// o.Dir/ca.pem and o.Dir/ca-key.pem and returns their paths.
func CreateCA(o CAOptions) (certFile, keyFile string, err error) {
	days, err := validDays(o.Days, DefaultCADays)
	if err != nil {
		return "", "", err
	}
	if o.Dir == "" {
		return "", "", errors.New("tls: the directory must not be empty")
	}
	certFile, keyFile = CAFiles(o.Dir)
	if err := refuseExisting(o.Force, certFile, keyFile); err != nil {
		return "", "", err
	}
	certPEM, keyPEM, err := GenerateCA(days, o.Now)
	if err != nil {
		return "", "", err
	}
	if err := writeFiles(o.Dir, o.Force, []outFile{{keyFile, keyPEM, 0o600}, {certFile, certPEM, 0o644}}); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// GenerateCA returns a new self-signed CA certificate valid for days from now (zero:
// time.Now()) and its key, PEM-encoded (the key as PKCS #8).
func GenerateCA(days int, now time.Time) (certPEM, keyPEM []byte, err error) {
	if now.IsZero() {
		now = time.Now()
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: generate the CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	ski, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			// The serial's start tells CAs apart, as Consul's "Consul Agent CA <n>".
			CommonName:   "Roster CA " + hex.EncodeToString(serial.Bytes()[:4]),
			Organization: []string{"Roster"},
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs node certificates only, no intermediate CAs
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: sign the CA certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// CertOptions configures CreateCert.
type CertOptions struct {
	// Dir holds the CA (ca.pem, ca-key.pem) and receives NODE.pem and NODE-key.pem.
	Dir string
	// Node names the files and is the certificate's common name (ValidateNode).
	Node string
	// DNSNames and IPs are added to the certificate's names, after DefaultDNSNames and
	// DefaultIPs (ValidateDNSName, ParseIP).
	DNSNames []string
	IPs      []string
	// Days is the validity (0: DefaultCertDays); it may not outlast the CA.
	Days int
	// Force replaces existing files; without it CreateCert refuses to overwrite any.
	Force bool
	// Now is the issue time (zero: time.Now()).
	Now time.Time
}

// CreateCert writes a node certificate (0644) signed by the CA in o.Dir, and its ECDSA
// P-256 key (0600), to o.Dir/NODE.pem and o.Dir/NODE-key.pem and returns their paths.
// The certificate serves both as a server and as a client certificate.
func CreateCert(o CertOptions) (certFile, keyFile string, err error) {
	if err := ValidateNode(o.Node); err != nil {
		return "", "", err
	}
	days, err := validDays(o.Days, DefaultCertDays)
	if err != nil {
		return "", "", err
	}
	dns, ips, err := sans(o.DNSNames, o.IPs)
	if err != nil {
		return "", "", err
	}
	if o.Dir == "" {
		return "", "", errors.New("tls: the directory must not be empty")
	}
	certFile, keyFile = NodeFiles(o.Dir, o.Node)
	if err := refuseExisting(o.Force, certFile, keyFile); err != nil {
		return "", "", err
	}
	caCert, caKey, err := readCA(o.Dir)
	if err != nil {
		return "", "", err
	}
	certPEM, keyPEM, err := GenerateCert(caCert, caKey, o.Node, dns, ips, days, o.Now)
	if err != nil {
		return "", "", err
	}
	if err := writeFiles(o.Dir, o.Force, []outFile{{keyFile, keyPEM, 0o600}, {certFile, certPEM, 0o644}}); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// GenerateCert returns a certificate for node, signed by ca with caKey and valid for
// days from now (zero: time.Now()), with exactly the names and addresses given, and its
// new key, PEM-encoded. It refuses a validity that would outlast the CA's.
func GenerateCert(ca *x509.Certificate, caKey crypto.Signer, node string, dnsNames []string, ips []net.IP, days int, now time.Time) (certPEM, keyPEM []byte, err error) {
	if now.IsZero() {
		now = time.Now()
	}
	notAfter := now.AddDate(0, 0, days)
	if notAfter.After(ca.NotAfter) {
		return nil, nil, fmt.Errorf("tls: a certificate valid for %d days would outlast the CA, which expires on %s; ask for fewer --days or create a new CA",
			days, ca.NotAfter.UTC().Format(time.DateOnly))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: generate the key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	ski, err := subjectKeyID(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: node, Organization: []string{"Roster"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: sign the certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// ValidateNode accepts a node name that is safe as a file name on every system: 1 to 64
// ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, and not the
// name of the CA's own files ("ca", "ca-key").
func ValidateNode(node string) error {
	switch {
	case node == "":
		return errors.New("tls: --node must not be empty")
	case len(node) > MaxNodeLen:
		return fmt.Errorf("tls: --node %q: at most %d characters", node, MaxNodeLen)
	case !alnum(node[0]):
		return fmt.Errorf("tls: --node %q: must start with a letter or digit", node)
	case node == "ca" || node == "ca-key":
		return fmt.Errorf("tls: --node %q: names the CA's own files", node)
	}
	for i := 0; i < len(node); i++ {
		if c := node[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("tls: --node %q: only letters, digits, '.', '_' and '-' are allowed", node)
		}
	}
	return nil
}

// ValidateDNSName accepts a DNS name for a certificate: dot-separated labels of 1 to 63
// letters, digits and '-' (not at a label's ends), at most 253 characters, optionally
// starting with a "*." wildcard label. An IP address is refused (it belongs in --ip),
// and so is a wildcard over a single label or a public suffix ("*", "*.com",
// "*.co.uk", "*.github.io"; the Public Suffix List of golang.org/x/net/publicsuffix):
// such a certificate would be valid for names under every domain of the suffix, which
// are other people's. A wildcard under a name of one's own ("*.roster.internal") is
// accepted.
func ValidateDNSName(name string) error {
	if net.ParseIP(name) != nil {
		return fmt.Errorf("tls: --dns %q is an IP address; give it with --ip", name)
	}
	if name == "" || len(name) > 253 {
		return fmt.Errorf("tls: --dns %q: a DNS name has 1 to 253 characters", name)
	}
	if name == "*" {
		return fmt.Errorf("tls: --dns %q: a wildcard must stand for one label under a domain of your own (*.roster.example)", name)
	}
	if err := validateNameLabels(name); err != nil {
		return err
	}
	if under, ok := strings.CutPrefix(name, "*."); ok {
		if !strings.Contains(under, ".") {
			return fmt.Errorf("tls: --dns %q: a wildcard over a single label (a top-level domain) would cover other people's names; "+
				"use *.a-domain-of-yours.%s or list the names", name, under)
		}
		if suffix, _ := publicsuffix.PublicSuffix(under); suffix == under {
			return fmt.Errorf("tls: --dns %q: %q is a public suffix, so the wildcard would cover other people's names; "+
				"use a wildcard under a domain of your own or list the names", name, under)
		}
	}
	return nil
}

// validateNameLabels checks the labels of a DNS name (a leading "*." aside).
func validateNameLabels(name string) error {
	labels := strings.Split(strings.TrimPrefix(name, "*."), ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("tls: --dns %q is not a DNS name (labels of 1 to 63 characters, no '-' at their ends)", name)
		}
		for i := 0; i < len(l); i++ {
			if !alnum(l[i]) && l[i] != '-' {
				return fmt.Errorf("tls: --dns %q is not a DNS name (only letters, digits, '-' and '.'; '*.' only in front)", name)
			}
		}
	}
	return nil
}

// ParseIP parses an IPv4 or IPv6 address for a certificate (no zone, no port).
func ParseIP(s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("tls: --ip %q is not an IP address", s)
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip, nil
}

// sans validates the names and addresses asked for and puts them after the defaults,
// without duplicates (names compared without case).
func sans(dnsNames, ipStrs []string) ([]string, []net.IP, error) {
	dns := append([]string(nil), DefaultDNSNames...)
	seen := map[string]bool{}
	for _, d := range dns {
		seen[d] = true
	}
	for _, d := range dnsNames {
		d = strings.ToLower(strings.TrimSpace(d))
		if err := ValidateDNSName(d); err != nil {
			return nil, nil, err
		}
		if !seen[d] {
			seen[d] = true
			dns = append(dns, d)
		}
	}
	var ips []net.IP
	add := func(ip net.IP) {
		for _, have := range ips {
			if have.Equal(ip) {
				return
			}
		}
		ips = append(ips, ip)
	}
	for _, ip := range DefaultIPs {
		add(ip)
	}
	for _, s := range ipStrs {
		ip, err := ParseIP(strings.TrimSpace(s))
		if err != nil {
			return nil, nil, err
		}
		add(ip)
	}
	return dns, ips, nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validDays applies the default to 0 and bounds the rest.
func validDays(days, def int) (int, error) {
	switch {
	case days == 0:
		return def, nil
	case days < 0 || days > MaxDays:
		return 0, fmt.Errorf("tls: --days %d: must be 1 to %d", days, MaxDays)
	}
	return days, nil
}

// newSerial is a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("tls: serial number: %w", err)
	}
	if n.Sign() == 0 || len(n.Bytes()) < 4 {
		n.SetBit(n, 127, 1) // positive, and long enough to name a CA by
	}
	return n, nil
}

// subjectKeyID identifies a public key: the leftmost 160 bits of the SHA-256 of its
// bits (RFC 7093 §2, method 1). Parents' ids become their children's authority key ids.
func subjectKeyID(pub *ecdsa.PublicKey) ([]byte, error) {
	k, err := pub.ECDH()
	if err != nil {
		return nil, fmt.Errorf("tls: public key: %w", err)
	}
	sum := sha256.Sum256(k.Bytes())
	return sum[:20], nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tls: encode the key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// readCA reads and checks the CA certificate and key in dir.
func readCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certFile, keyFile := CAFiles(dir)
	certs, err := readCerts(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: the CA certificate: %w (create one with roster tls ca create)", err)
	}
	ca := certs[0]
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("tls: %s is not a CA certificate", certFile)
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: the CA key: %w", err)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: %s: %w", keyFile, err)
	}
	if !samePublicKey(ca.PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("tls: %s is not the key of %s", keyFile, certFile)
	}
	return ca, key, nil
}

// parseKey reads the first private key of a PEM file: PKCS #8, SEC 1 (EC) or PKCS #1 (RSA).
func parseKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no private key in PEM form")
		}
		var (
			k   any
			err error
		)
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", k)
		}
		return s, nil
	}
}

func samePublicKey(a, b crypto.PublicKey) bool {
	x, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && x.Equal(b)
}

// readCerts reads every certificate of a PEM file; it fails when there is none.
func readCerts(file string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return out, nil
}
