package client

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/tlsutil"
)

// newTLSNode serves a ready node over HTTPS with a certificate of a new CA; it returns
// the server and the CA file.
func newTLSNode(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	caFile, _, err := tlsutil.CreateCA(tlsutil.CAOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := tlsutil.CreateCert(tlsutil.CertOptions{Dir: dir, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := tlsutil.LoadNode(tlsutil.Files{CertFile: cert, KeyFile: key, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ready":true,"leader":"n1"}`)
	}))
	srv.TLS = nc.HTTPServer(false)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, caFile
}

// WithTLSConfig dials an address without a scheme over HTTPS and verifies the node's
// certificate against the CA given; without it, or with another CA, the call fails.
func TestClient_WithTLSConfig(t *testing.T) {
	srv, caFile := newTLSNode(t)
	_, otherCA := newTLSNode(t)
	addr := srv.Listener.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := tlsutil.ClientConfig(tlsutil.Files{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{addr, "https://" + addr} {
		c := New(a, WithTLSConfig(cfg))
		if !strings.HasPrefix(c.Addr(), "https://") {
			t.Fatalf("%s: base %s", a, c.Addr())
		}
		if r, err := c.Ready(ctx); err != nil || !r.Ready {
			t.Fatalf("%s: %+v %v", a, r, err)
		}
	}
	other, err := tlsutil.ClientConfig(tlsutil.Files{CAFile: otherCA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(addr, WithTLSConfig(other)).Ready(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v", err)
	}
	if _, err := New(addr).Ready(ctx); err == nil {
		t.Fatal("plain HTTP to the HTTPS node succeeded")
	}
	if _, err := New("https://" + addr).Ready(ctx); err == nil {
		t.Fatal("HTTPS without the CA succeeded")
	}
	// An explicit http:// stays plain HTTP.
	if c := New("http://"+addr, WithTLSConfig(cfg)); !strings.HasPrefix(c.Addr(), "http://") {
		t.Fatalf("http:// became %s", c.Addr())
	}
	// A client of the caller's own keeps its TLS settings.
	own := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}}}
	if r, err := New(addr, WithHTTPClient(own), WithTLSConfig(other)).Ready(ctx); err != nil || !r.Ready {
		t.Fatalf("WithHTTPClient's TLS: %+v %v", r, err)
	}
}
