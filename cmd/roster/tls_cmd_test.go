package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func parseCertFile(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// roster tls ca create and cert create write a CA and a node certificate it signed, with
// the names asked for beside the loopback ones, keys 0600, and say what they wrote.
func TestTLS_CreateCAAndCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir, "--days", "30")
	if r.code != 0 || !strings.Contains(r.stdout, filepath.Join(dir, "ca.pem")) || !strings.Contains(r.stdout, "ca-key.pem (its key: keep it secret)") {
		t.Fatalf("ca create: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	ca := parseCertFile(t, filepath.Join(dir, "ca.pem"))
	if !ca.IsCA || ca.NotAfter.Sub(ca.NotBefore) > 31*24*time.Hour {
		t.Fatalf("CA: IsCA %v, valid %s to %s", ca.IsCA, ca.NotBefore, ca.NotAfter)
	}

	r = runCLI(t, map[string]string{"ROSTER_DAYS": "10"}, "tls", "cert", "create", "--dir", dir, "--node", "n1",
		"--dns", "roster1.example,roster.internal", "--ip", "10.0.0.1", "--ip", "fd00::7")
	if r.code != 0 {
		t.Fatalf("cert create: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"),
		"valid for: localhost, roster1.example, roster.internal, 127.0.0.1, ::1, 10.0.0.1, fd00::7", "expires: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	leaf := parseCertFile(t, filepath.Join(dir, "n1.pem"))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "roster1.example",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the certificate does not verify against the CA: %v", err)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d < 10*24*time.Hour || d > 10*24*time.Hour+2*time.Minute {
		t.Errorf("ROSTER_DAYS=10: valid for %s", d)
	}
	if !slices.Contains(leaf.DNSNames, "roster.internal") || leaf.Subject.CommonName != "n1" {
		t.Errorf("names %q, subject %q", leaf.DNSNames, leaf.Subject.CommonName)
	}
	for _, f := range []string{"ca-key.pem", "n1-key.pem"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi.Mode(), err)
		}
	}
}

// Existing files are kept unless --force is given.
func TestTLS_RefusesToOverwriteWithoutForce(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir); r.code != 0 {
		t.Fatalf("ca create: %s", r.stderr)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "ca.pem already exists; remove it or pass --force") {
		t.Fatalf("second ca create: exit %d, %s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(after) != string(before) {
		t.Fatal("ca.pem was replaced")
	}
	if r := runCLI(t, nil, "tls", "cert", "create", "--dir", dir, "--node", "n1"); r.code != 0 {
		t.Fatalf("cert create: %s", r.stderr)
	}
	if r := runCLI(t, nil, "tls", "cert", "create", "--dir", dir, "--node", "n1"); r.code != 1 || !strings.Contains(r.stderr, "n1.pem already exists") {
		t.Fatalf("second cert create: exit %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, nil, "tls", "cert", "create", "--dir", dir, "--node", "n1", "--force"); r.code != 0 {
		t.Fatalf("cert create --force: %s", r.stderr)
	}
	if r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir, "--force"); r.code != 0 {
		t.Fatalf("ca create --force: %s", r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(after) == string(before) {
		t.Fatal("--force kept the old ca.pem")
	}
}

// Bad flags exit 1 with a message naming the flag and write nothing.
func TestTLS_BadFlags(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir, "--days", "60"); r.code != 0 {
		t.Fatalf("ca create: %s", r.stderr)
	}
	empty := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tls", "cert", "create", "--dir", dir}, "roster: --node is required (or ROSTER_NODE)"},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "../etc/n1"}, `--node "../etc/n1"`},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "ca"}, "names the CA's own files"},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "bad_name.example"}, `--dns "bad_name.example" is not a DNS name`},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "10.1.1.1"}, "give it with --ip"},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--ip", "10.1.1"}, `--ip "10.1.1" is not an IP address`},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--days", "0"}, "--days 0: must be 1 to"},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--days", "61"}, "would outlast the CA"},
		{[]string{"tls", "cert", "create", "--dir", empty, "--node", "n1"}, "roster tls ca create"},
		{[]string{"tls", "ca", "create", "--dir", empty, "--days", "-3"}, "--days -3: must be 1 to"},
		{[]string{"tls", "ca", "create", "--dir", empty, "extra"}, "usage: roster tls ca create"},
	}
	for _, tc := range cases {
		r := runCLI(t, nil, tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	for _, d := range []string{dir, empty} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if n := e.Name(); n != "ca.pem" && n != "ca-key.pem" {
				t.Errorf("%s was written", filepath.Join(d, n))
			}
		}
	}
}
