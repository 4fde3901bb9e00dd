package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/server/servertest"
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
		"--dns", "roster1.example,roster.internal", "--ip", "127.0.1.1", "--ip", "127.0.1.2")
	if r.code != 0 {
		t.Fatalf("cert create: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"),
		"valid for: localhost, roster1.example, roster.internal, 127.0.0.1, ::1, 127.0.1.1, 127.0.1.2", "expires: "} {
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

// Bad flags exit non-zero (2 for what the command line checks refuse, 1 for what
// tlsutil refuses) with a message naming the flag, and write nothing.
func TestTLS_BadFlags(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, nil, "tls", "ca", "create", "--dir", dir, "--days", "60"); r.code != 0 {
		t.Fatalf("ca create: %s", r.stderr)
	}
	empty := t.TempDir()
	cases := []struct {
		args []string
		want string
		code int // exitUsage: refused by the command line checks; exitError: by tlsutil
	}{
		{[]string{"tls", "cert", "create", "--dir", dir}, "roster: --node is required (or ROSTER_NODE)", exitUsage},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "../etc/n1"}, `--node "../etc/n1"`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "ca"}, "names the CA's own files", exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "bad_name.example"}, `--dns "bad_name.example" is not a DNS name`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "127.1.1.1"}, "give it with --ip", exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "roster1.example,*.co.uk"}, `--dns "*.co.uk": "co.uk" is a public suffix`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "*.com"}, `--dns "*.com": a wildcard over a single label`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--dns", "*"}, `--dns "*": a wildcard must stand for one label`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--ip", "10.1.1"}, `--ip "10.1.1" is not an IP address`, exitError},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--days", "0"}, "--days 0: must be 1 to", exitUsage},
		{[]string{"tls", "cert", "create", "--dir", dir, "--node", "n1", "--days", "61"}, "would outlast the CA", exitError},
		{[]string{"tls", "cert", "create", "--dir", empty, "--node", "n1"}, "roster tls ca create", exitError},
		{[]string{"tls", "ca", "create", "--dir", empty, "--days", "-3"}, "--days -3: must be 1 to", exitUsage},
		{[]string{"tls", "ca", "create", "--dir", empty, "extra"}, "usage: roster tls ca create", exitUsage},
	}
	for _, tc := range cases {
		r := runCLI(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
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

// The client commands reach a TLS cluster with --ca-file (or ROSTER_CA_FILE), an --addr
// without a scheme then meaning https; without the CA they fail. Under
// --tls-verify-incoming they also need --cert-file and --key-file. nacos-watch speaks
// TLS to the gRPC port with the same flags.
func TestTLS_ClientCommandsOverHTTPS(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLS(), servertest.WithGRPC())
	c.MustLeader()
	nd := c.Nodes[0]
	registerN(cliCtx(t), t, nd.Client(), "orders", 1)
	ca := c.TLS.CAFile

	r := runCLI(t, nil, "members", "--addr", nd.HTTPAddr, "--ca-file", ca)
	if r.code != 0 || !strings.Contains(r.stdout, "https://"+nd.HTTPAddr) {
		t.Fatalf("members --ca-file: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, map[string]string{"ROSTER_CA_FILE": ca}, "instances", "orders", "--addr", "https://"+nd.HTTPAddr); r.code != 0 || !strings.Contains(r.stdout, "127.100.0.1") {
		t.Fatalf("instances with ROSTER_CA_FILE: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "ready", "--addr", "https://"+nd.HTTPAddr); r.code != 1 || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("ready without the CA: exit %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, nil, "ready", "--addr", nd.HTTPAddr); r.code != 1 {
		t.Fatalf("ready over plain HTTP: exit %d, %s", r.code, r.stderr)
	}
	r = runCLI(t, nil, "nacos-watch", "orders", "--grpc-addr", nd.GRPCAddr, "--ca-file", ca, "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "127.100.0.1") {
		t.Fatalf("nacos-watch --ca-file: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "nacos-watch", "orders", "--grpc-addr", nd.GRPCAddr, "--once", "--timeout", "2s"); r.code != 1 {
		t.Fatalf("nacos-watch in plain text: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, nil, "ready", "--addr", nd.HTTPAddr, "--ca-file", ca, "--cert-file", c.TLS.ClientCertFile); r.code != 1 || !strings.Contains(r.stderr, "both") {
		t.Fatalf("--cert-file without --key-file: exit %d, %s", r.code, r.stderr)
	}
	if r := runCLI(t, nil, "ready", "--addr", nd.HTTPAddr, "--ca-file", filepath.Join(t.TempDir(), "none.pem")); r.code != 1 || !strings.Contains(r.stderr, "--ca-file") {
		t.Fatalf("a missing --ca-file: exit %d, %s", r.code, r.stderr)
	}
}

// Under --tls-verify-incoming a client command needs a client certificate of the CA.
func TestTLS_ClientCommandsWithClientCertificate(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLSVerifyIncoming())
	c.MustLeader()
	nd := c.Nodes[0]
	if r := runCLI(t, nil, "ready", "--addr", nd.HTTPAddr, "--ca-file", c.TLS.CAFile); r.code != 1 {
		t.Fatalf("ready without a client certificate: exit %d\n%s", r.code, r.stdout)
	}
	env := map[string]string{"ROSTER_CERT_FILE": c.TLS.ClientCertFile, "ROSTER_KEY_FILE": c.TLS.ClientKeyFile}
	if r := runCLI(t, env, "ready", "--addr", nd.HTTPAddr, "--ca-file", c.TLS.CAFile); r.code != 0 {
		t.Fatalf("ready with a client certificate: exit %d\n%s", r.code, r.stderr)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "snap")
	if r := runCLI(t, env, "snapshot", "save", path, "--addr", nd.HTTPAddr, "--ca-file", c.TLS.CAFile); r.code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s", r.code, r.stderr)
	}
}

// roster server takes the --tls-* flags (and ROSTER_TLS_* variables) into the node's
// options, and refuses a partial set before starting anything.
func TestTLS_ServerFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &fakeNode{onStart: func(nodeOptions, *slog.Logger) { cancel() }}
	a, _, stderr := newTestApp(t, map[string]string{"ROSTER_TLS_CA_FILE": "/etc/roster/ca.pem", "ROSTER_TLS_VERIFY_INCOMING": "true"})
	a.startNode = node.start
	if code := run(ctx, []string{"server", "--node-id", "n1", "--data-dir", "/d", "--tls-cert-file", "/etc/roster/n1.pem", "--tls-key-file", "/etc/roster/n1-key.pem"}, a); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := node.options(t)
	if got.TLSCertFile != "/etc/roster/n1.pem" || got.TLSKeyFile != "/etc/roster/n1-key.pem" || got.TLSCAFile != "/etc/roster/ca.pem" || !got.TLSVerifyIncoming {
		t.Fatalf("options %+v", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", "c.pem"}, "roster: --tls-cert-file, --tls-key-file and --tls-ca-file go together: --tls-cert-file given without --tls-key-file and --tls-ca-file"},
		{[]string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, "--tls-cert-file, --tls-key-file given without --tls-ca-file"},
		{[]string{"--tls-ca-file", "ca.pem"}, "without --tls-cert-file and --tls-key-file"},
		{[]string{"--tls-verify-incoming"}, "roster: --tls-verify-incoming needs --tls-cert-file, --tls-key-file and --tls-ca-file"},
	} {
		a, _, stderr := newTestApp(t, nil)
		a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
			t.Errorf("%v: node started", tc.args)
			return "", nil, errors.New("unexpected")
		}
		args := append([]string{"server", "--node-id", "n1", "--data-dir", "/d"}, tc.args...)
		if code := run(context.Background(), args, a); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
