package tlsutil

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mustCA creates a CA in a new directory and returns the directory.
func mustCA(t *testing.T, o CAOptions) string {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if _, _, err := CreateCA(o); err != nil {
		t.Fatalf("CreateCA: %v", err)
	}
	return o.Dir
}

func mustCert(t *testing.T, o CertOptions) (certFile, keyFile string) {
	t.Helper()
	c, k, err := CreateCert(o)
	if err != nil {
		t.Fatalf("CreateCert(%+v): %v", o, err)
	}
	return c, k
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	certs, err := readCerts(file)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func readKey(t *testing.T, file string) *ecdsa.PrivateKey {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		t.Fatalf("%s: not a PKCS #8 PEM key", file)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("%s: key is %T, want ECDSA", file, k)
	}
	return ek
}

func mode(t *testing.T, file string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// A new CA is a self-signed P-256 CA certificate that can sign node certificates only,
// valid for five years by default or --days, written beside its key with modes 0644
// and 0600 (whatever the umask) into a directory created 0700.
func TestCreateCA_CertificateKeyAndModes(t *testing.T) {
	old := setUmask(0o077)
	defer setUmask(old)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		days     int
		wantDays int
	}{{0, DefaultCADays}, {30, 30}} {
		dir := filepath.Join(t.TempDir(), "new", "tls")
		certFile, keyFile, err := CreateCA(CAOptions{Dir: dir, Days: tc.days, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if certFile != filepath.Join(dir, "ca.pem") || keyFile != filepath.Join(dir, "ca-key.pem") {
			t.Fatalf("files %s %s", certFile, keyFile)
		}
		if m := mode(t, certFile); m != 0o644 {
			t.Errorf("ca.pem mode %o, want 644", m)
		}
		if m := mode(t, keyFile); m != 0o600 {
			t.Errorf("ca-key.pem mode %o, want 600", m)
		}
		if m := mode(t, dir); m != 0o700 {
			t.Errorf("directory mode %o, want 700", m)
		}
		ca := readCert(t, certFile)
		key := readKey(t, keyFile)
		if !ca.IsCA || !ca.BasicConstraintsValid || ca.MaxPathLen != 0 || !ca.MaxPathLenZero {
			t.Errorf("CA constraints: IsCA %v, MaxPathLen %d zero %v", ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero)
		}
		if ca.KeyUsage&x509.KeyUsageCertSign == 0 || ca.KeyUsage&x509.KeyUsageCRLSign == 0 {
			t.Errorf("CA key usage %b", ca.KeyUsage)
		}
		pub, ok := ca.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() || !pub.Equal(key.Public()) {
			t.Errorf("CA public key %T is not the P-256 key of ca-key.pem", ca.PublicKey)
		}
		if err := ca.CheckSignatureFrom(ca); err != nil {
			t.Errorf("CA is not self-signed: %v", err)
		}
		if !strings.HasPrefix(ca.Subject.CommonName, "Roster CA ") || len(ca.SubjectKeyId) == 0 {
			t.Errorf("subject %q, key id %x", ca.Subject.CommonName, ca.SubjectKeyId)
		}
		if got := ca.NotAfter.Sub(now); got != time.Duration(tc.wantDays)*24*time.Hour {
			t.Errorf("days %d: valid for %s after issue", tc.days, got)
		}
		if !ca.NotBefore.Before(now) {
			t.Errorf("NotBefore %s is not backdated from %s", ca.NotBefore, now)
		}
	}
}

// A node certificate is a P-256 certificate signed by the CA, usable as server and
// client certificate, named after the node, and valid for localhost, 127.0.0.1 and ::1
// plus the names and addresses asked for (once each); its key is written 0600.
func TestCreateCert_SignedByTheCAWithSANsAndUsages(t *testing.T) {
	dir := mustCA(t, CAOptions{})
	now := time.Now()
	certFile, keyFile := mustCert(t, CertOptions{
		Dir: dir, Node: "n1", DNSNames: []string{"roster1.example", "LOCALHOST", "*.roster.internal", "roster1.example"},
		IPs: []string{"127.0.1.1", "127.0.0.1", "::1", "::ffff:127.0.1.2"}, Now: now,
	})
	if certFile != filepath.Join(dir, "n1.pem") || keyFile != filepath.Join(dir, "n1-key.pem") {
		t.Fatalf("files %s %s", certFile, keyFile)
	}
	if m := mode(t, keyFile); m != 0o600 {
		t.Errorf("key mode %o, want 600", m)
	}
	if m := mode(t, certFile); m != 0o644 {
		t.Errorf("certificate mode %o, want 644", m)
	}
	ca := readCert(t, filepath.Join(dir, CAFileName))
	leaf := readCert(t, certFile)
	key := readKey(t, keyFile)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	for _, host := range []string{"localhost", "roster1.example", "a.roster.internal", "127.0.0.1", "::1", "127.0.1.1", "127.0.1.2"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("host %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example"}); err == nil {
		t.Error("the certificate verifies for other.example")
	}
	if want := []string{"localhost", "roster1.example", "*.roster.internal"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS names %q, want %q", leaf.DNSNames, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "127.0.1.1", "127.0.1.2"}; !slices.Equal(ips, want) {
		t.Errorf("IP addresses %q, want %q", ips, want)
	}
	if leaf.IsCA || leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("IsCA %v, key usage %b", leaf.IsCA, leaf.KeyUsage)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("extended key usage %v", leaf.ExtKeyUsage)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() || !pub.Equal(key.Public()) {
		t.Errorf("public key %T is not the P-256 key of n1-key.pem", leaf.PublicKey)
	}
	if leaf.Subject.CommonName != "n1" || !bytes.Equal(leaf.AuthorityKeyId, ca.SubjectKeyId) {
		t.Errorf("subject %q, authority key id %x (CA %x)", leaf.Subject.CommonName, leaf.AuthorityKeyId, ca.SubjectKeyId)
	}
	if d := leaf.NotAfter.Sub(now); d < 365*24*time.Hour-time.Second || d > 365*24*time.Hour {
		t.Errorf("valid for %s, want a year", d)
	}
	if leaf.SerialNumber.Cmp(ca.SerialNumber) == 0 || leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v (CA %v)", leaf.SerialNumber, ca.SerialNumber)
	}
}

// Existing files are never overwritten without Force: the files stay as they were and
// the error names the file and --force. With Force they are replaced.
func TestCreate_RefusesToOverwrite(t *testing.T) {
	dir := mustCA(t, CAOptions{})
	caBefore, _ := os.ReadFile(filepath.Join(dir, CAFileName))
	if _, _, err := CreateCA(CAOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "ca.pem already exists") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second CreateCA: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAFileName)); !bytes.Equal(after, caBefore) {
		t.Fatal("ca.pem changed")
	}

	certFile, keyFile := mustCert(t, CertOptions{Dir: dir, Node: "n1"})
	certBefore, _ := os.ReadFile(certFile)
	keyBefore, _ := os.ReadFile(keyFile)
	if _, _, err := CreateCert(CertOptions{Dir: dir, Node: "n1"}); err == nil || !strings.Contains(err.Error(), "n1.pem already exists") {
		t.Fatalf("second CreateCert: %v", err)
	}
	// Only the key exists: nothing is written either.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCert(CertOptions{Dir: dir, Node: "n1"}); err == nil || !strings.Contains(err.Error(), "n1-key.pem already exists") {
		t.Fatalf("CreateCert over a key: %v", err)
	}
	if _, err := os.Stat(certFile); err == nil {
		t.Fatal("the certificate was written beside the old key")
	}
	if after, _ := os.ReadFile(keyFile); !bytes.Equal(after, keyBefore) {
		t.Fatal("the key changed")
	}

	mustCert(t, CertOptions{Dir: dir, Node: "n1", Force: true})
	certAfter, _ := os.ReadFile(certFile)
	keyAfter, _ := os.ReadFile(keyFile)
	if bytes.Equal(certAfter, certBefore) || bytes.Equal(keyAfter, keyBefore) {
		t.Fatal("Force did not replace the files")
	}
	if m := mode(t, keyFile); m != 0o600 {
		t.Errorf("replaced key mode %o", m)
	}
	if _, _, err := CreateCA(CAOptions{Dir: dir, Force: true}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAFileName)); bytes.Equal(after, caBefore) {
		t.Fatal("Force did not replace ca.pem")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// Bad inputs are refused with an error naming the flag and the value, before anything
// is written.
func TestCreateCert_BadInputs(t *testing.T) {
	dir := mustCA(t, CAOptions{Days: 100})
	long := strings.Repeat("a", MaxNodeLen+1)
	cases := []struct {
		name string
		o    CertOptions
		want string
	}{
		{"empty node", CertOptions{}, "--node must not be empty"},
		{"path", CertOptions{Node: "../n1"}, `--node "../n1": must start with a letter or digit`},
		{"slash", CertOptions{Node: "n/1"}, "only letters, digits"},
		{"space", CertOptions{Node: "n 1"}, "only letters, digits"},
		{"hidden", CertOptions{Node: ".n1"}, "must start with a letter or digit"},
		{"non-ascii", CertOptions{Node: "nœud"}, "only letters, digits"},
		{"the CA's name", CertOptions{Node: "ca"}, "names the CA's own files"},
		{"the CA key's name", CertOptions{Node: "ca-key"}, "names the CA's own files"},
		{"too long", CertOptions{Node: long}, "at most 64 characters"},
		{"dns empty", CertOptions{Node: "n1", DNSNames: []string{""}}, "--dns"},
		{"dns ip", CertOptions{Node: "n1", DNSNames: []string{"127.0.1.1"}}, "is an IP address; give it with --ip"},
		{"dns hyphen", CertOptions{Node: "n1", DNSNames: []string{"-a.example"}}, `--dns "-a.example" is not a DNS name`},
		{"dns empty label", CertOptions{Node: "n1", DNSNames: []string{"a..example"}}, "is not a DNS name"},
		{"dns underscore", CertOptions{Node: "n1", DNSNames: []string{"a_b.example"}}, "is not a DNS name"},
		{"dns inner wildcard", CertOptions{Node: "n1", DNSNames: []string{"a.*.example"}}, "is not a DNS name"},
		{"dns url", CertOptions{Node: "n1", DNSNames: []string{"https://a.example"}}, "is not a DNS name"},
		{"dns too long", CertOptions{Node: "n1", DNSNames: []string{strings.Repeat("a.", 127) + "ab"}}, "1 to 253 characters"},
		{"dns label too long", CertOptions{Node: "n1", DNSNames: []string{strings.Repeat("a", 64) + ".example"}}, "is not a DNS name"},
		{"ip short", CertOptions{Node: "n1", IPs: []string{"10.0.0"}}, `--ip "10.0.0" is not an IP address`},
		{"ip with port", CertOptions{Node: "n1", IPs: []string{"127.0.1.1:80"}}, "is not an IP address"},
		{"ip with zone", CertOptions{Node: "n1", IPs: []string{"fe80::1%eth0"}}, "is not an IP address"},
		{"ip name", CertOptions{Node: "n1", IPs: []string{"localhost"}}, "is not an IP address"},
		{"negative days", CertOptions{Node: "n1", Days: -1}, "--days -1: must be 1 to"},
		{"too many days", CertOptions{Node: "n1", Days: MaxDays + 1}, "must be 1 to"},
		{"outlasting the CA", CertOptions{Node: "n1", Days: 101}, "would outlast the CA"},
		{"no CA", CertOptions{Dir: t.TempDir(), Node: "n1"}, "roster tls ca create"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if o.Dir == "" {
				o.Dir = dir
			}
			_, _, err := CreateCert(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			entries, _ := os.ReadDir(o.Dir)
			for _, e := range entries {
				if n := e.Name(); n != CAFileName && n != CAKeyFileName {
					t.Errorf("%s was written", n)
				}
			}
		})
	}
	for _, days := range []int{-5, MaxDays + 1} {
		if _, _, err := CreateCA(CAOptions{Dir: t.TempDir(), Days: days}); err == nil || !strings.Contains(err.Error(), "--days") {
			t.Errorf("CreateCA days %d: %v", days, err)
		}
	}
	if _, _, err := CreateCA(CAOptions{}); err == nil {
		t.Error("CreateCA without a directory succeeded")
	}
}

// A CA whose key is not the certificate's, or a certificate that is no CA, signs nothing.
func TestCreateCert_RefusesAMismatchedCA(t *testing.T) {
	a := mustCA(t, CAOptions{})
	b := mustCA(t, CAOptions{})
	keyB, _ := os.ReadFile(filepath.Join(b, CAKeyFileName))
	if err := os.WriteFile(filepath.Join(a, CAKeyFileName), keyB, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCert(CertOptions{Dir: a, Node: "n1"}); err == nil || !strings.Contains(err.Error(), "is not the key of") {
		t.Fatalf("mismatched key: %v", err)
	}

	c := mustCA(t, CAOptions{})
	leafFile, leafKey := mustCert(t, CertOptions{Dir: c, Node: "n1"})
	d := t.TempDir()
	for src, dst := range map[string]string{leafFile: CAFileName, leafKey: CAKeyFileName} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(filepath.Join(d, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := CreateCert(CertOptions{Dir: d, Node: "n2"}); err == nil || !strings.Contains(err.Error(), "is not a CA certificate") {
		t.Fatalf("a node certificate as CA: %v", err)
	}
}

// ParseIP and ValidateDNSName accept what certificates carry.
func TestValidate_GoodNames(t *testing.T) {
	for _, n := range []string{"n1", "roster-1", "node_2.dc1", "A", strings.Repeat("a", MaxNodeLen)} {
		if err := ValidateNode(n); err != nil {
			t.Errorf("node %q: %v", n, err)
		}
	}
	for _, d := range []string{"localhost", "roster1", "a.example", "*.example.com", "xn--bcher-kva.example", "1a.example"} {
		if err := ValidateDNSName(d); err != nil {
			t.Errorf("dns %q: %v", d, err)
		}
	}
	for in, want := range map[string]string{"127.0.1.1": "127.0.1.1", "::1": "::1", "::ffff:127.1.2.3": "127.1.2.3"} {
		ip, err := ParseIP(in)
		if err != nil || ip.String() != want {
			t.Errorf("ip %q: %v %v", in, ip, err)
		}
		if in == "127.0.1.1" && len(ip) != net.IPv4len {
			t.Errorf("ip %q kept as %d bytes", in, len(ip))
		}
	}
}

// A wildcard over a single label or a public suffix is refused, naming the flag; one
// under a domain of one's own is accepted.
func TestValidateDNSName_Wildcards(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" accepted, else a part of the error
	}{
		{"*", `--dns "*": a wildcard must stand for one label`},
		{"*.com", `--dns "*.com": a wildcard over a single label`},
		{"*.internal", "a wildcard over a single label"},
		{"*.co.uk", `--dns "*.co.uk": "co.uk" is a public suffix`},
		{"*.com.au", "is a public suffix"},
		{"*.github.io", `"github.io" is a public suffix`}, // a private-section suffix: other people's too
		{"*.*.example.com", "is not a DNS name"},
		{"*.", "is not a DNS name"},
		{"*.roster.internal", ""},
		{"*.example.com", ""},
		{"*.example.co.uk", ""},
		{"*.dc1.roster.example", ""},
		{"com", ""}, // not a wildcard: names that one host only
		{"co.uk", ""},
	} {
		err := ValidateDNSName(tt.name)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q refused: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}
