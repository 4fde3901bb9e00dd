package healthcheck

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/tlstest"
	"github.com/rosterhq/roster/model"
)

// tlsServer starts an HTTPS server on 127.0.0.1 with a certificate of ca for
// svc.test, 127.0.0.1 and ::1; GET /status/503 answers 503, anything else 200.
func tlsServer(t *testing.T, ca *tlstest.CA) (addr string, expiry time.Time) {
	t.Helper()
	cfg, expiry := ca.ServerConfig(t, "svc.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status/503" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), expiry
}

func tlsSpec(typ model.CheckType, f func(*model.HealthCheck)) *spec {
	hc := model.HealthCheck{Type: typ, Interval: model.Duration(10 * time.Second), Timeout: model.Duration(2 * time.Second), Rise: 1, Fall: 1}
	if f != nil {
		f(&hc)
	}
	return newSpec(hc)
}

func TestTLSProbes(t *testing.T) {
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	addr, expiry := tlsServer(t, ca)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(plain.Close)
	plainAddr := strings.TrimPrefix(plain.URL, "http://")
	c := mustNewChecker(t, Config{})

	trusted := func(h *model.HealthCheck) { h.TLSCAPEM = ca.PEM }
	for _, typ := range []model.CheckType{model.CheckHTTPS, model.CheckTLS} {
		for _, tc := range []struct {
			name  string
			addr  string
			f     func(*model.HealthCheck)
			class string
			err   string
		}{
			{"trusted CA, address as name", addr, trusted, OutcomeSuccess, ""},
			{"trusted CA, server name", addr, func(h *model.HealthCheck) { trusted(h); h.TLSServerName = "svc.test" }, OutcomeSuccess, ""},
			{"wrong server name", addr, func(h *model.HealthCheck) { trusted(h); h.TLSServerName = "other.test" }, OutcomeTLS, "certificate is not valid for other.test"},
			{"wrong server name, skip verify", addr, func(h *model.HealthCheck) {
				trusted(h)
				h.TLSServerName, h.TLSSkipVerify = "other.test", true
			}, OutcomeSuccess, ""},
			{"untrusted CA", addr, func(h *model.HealthCheck) { h.TLSCAPEM = other.PEM }, OutcomeTLS, "certificate signed by an unknown authority"},
			{"system roots", addr, nil, OutcomeTLS, "certificate signed by an unknown authority"},
			{"untrusted CA, skip verify", addr, func(h *model.HealthCheck) { h.TLSSkipVerify = true }, OutcomeSuccess, ""},
			{"plain HTTP server", plainAddr, trusted, OutcomeTLS, "the server does not speak TLS"},
		} {
			t.Run(string(typ)+"/"+tc.name, func(t *testing.T) {
				sp := tlsSpec(typ, tc.f)
				o := c.probe(context.Background(), sp, tc.addr, probeURL(tc.addr, sp))
				if o.class != tc.class || o.ok != (tc.class == OutcomeSuccess) || (tc.err != "" && o.err != tc.err) {
					t.Fatalf("outcome %+v, want class %q error %q", o, tc.class, tc.err)
				}
				// The expiry is shown whenever the server sent a certificate, verified or not.
				if tc.addr == addr && !o.certExpiry.Equal(expiry) {
					t.Fatalf("certificate expiry %v, want %v", o.certExpiry, expiry)
				}
				if typ == model.CheckHTTPS && o.ok && o.status != http.StatusOK {
					t.Fatalf("status %d", o.status)
				}
			})
		}
	}

	t.Run("HTTPS unexpected status", func(t *testing.T) {
		sp := tlsSpec(model.CheckHTTPS, func(h *model.HealthCheck) { trusted(h); h.Path = "/status/503" })
		if sp.hc.Path != "/status/503" || probeURL(addr, sp) != "https://"+addr+"/status/503" {
			t.Fatalf("url %s", probeURL(addr, sp))
		}
		o := c.probe(context.Background(), sp, addr, probeURL(addr, sp))
		if o.ok || o.class != OutcomeStatus || o.status != http.StatusServiceUnavailable {
			t.Fatalf("outcome %+v", o)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		_ = ln.Close()
		o := c.probe(context.Background(), tlsSpec(model.CheckTLS, trusted), closed, "")
		if o.ok || o.class != OutcomeRefused {
			t.Fatalf("outcome %+v", o)
		}
	})
	t.Run("handshake timeout", func(t *testing.T) {
		// A listener that accepts and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		held := make(chan net.Conn, 4)
		t.Cleanup(func() {
			_ = ln.Close()
			for {
				select {
				case conn := <-held:
					_ = conn.Close()
				default:
					return
				}
			}
		})
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				select {
				case held <- conn:
				default:
					_ = conn.Close()
				}
			}
		}()
		sp := tlsSpec(model.CheckTLS, func(h *model.HealthCheck) { trusted(h); h.Timeout = model.Duration(200 * time.Millisecond) })
		o := c.probe(context.Background(), sp, ln.Addr().String(), "")
		if o.ok || o.class != OutcomeTimeout {
			t.Fatalf("outcome %+v", o)
		}
	})
}

// TestSpecEqual_TLSFields: a change of any TLS option is a new spec (re-probed).
func TestSpecEqual_TLSFields(t *testing.T) {
	base := model.HealthCheck{Type: model.CheckHTTPS, TLSServerName: "a.test", TLSCAPEM: "x"}
	for _, f := range []func(*model.HealthCheck){
		func(h *model.HealthCheck) { h.TLSServerName = "b.test" },
		func(h *model.HealthCheck) { h.TLSSkipVerify = true },
		func(h *model.HealthCheck) { h.TLSCAPEM = "y" },
		func(h *model.HealthCheck) { h.Type = model.CheckTLS },
	} {
		changed := base
		f(&changed)
		if newSpec(base).equal(newSpec(changed)) {
			t.Errorf("%+v equals %+v", changed, base)
		}
	}
	if !newSpec(base).equal(newSpec(base)) {
		t.Error("a spec differs from itself")
	}
}

// TestNewTypes_Policy: the probe policy applies to every type; a denied address is not
// dialled.
func TestNewTypes_Policy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			_ = conn.Close()
		}
	}()
	pol, err := ParsePolicy("", "127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	c := mustNewChecker(t, Config{Policy: pol})
	addr := ln.Addr().String()
	for _, typ := range []model.CheckType{model.CheckHTTPS, model.CheckTLS, model.CheckGRPC} {
		sp := tlsSpec(typ, nil)
		if o := c.probe(context.Background(), sp, addr, probeURL(addr, sp)); o.ok || o.class != OutcomeDenied {
			t.Errorf("%s: outcome %+v, want denied", typ, o)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a denied probe connected")
	default:
	}
}
