package healthcheck

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rosterhq/roster/internal/tlstest"
	"github.com/rosterhq/roster/model"
)

// grpcHealthServer starts a gRPC server with the standard health service on
// 127.0.0.1 (over TLS when creds is set) and returns its address and health server.
func grpcHealthServer(t *testing.T, creds credentials.TransportCredentials) (string, *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), hs
}

func TestGRPCProbe(t *testing.T) {
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	cfg, expiry := ca.ServerConfig(t, "svc.test")
	plainAddr, plainHealth := grpcHealthServer(t, nil)
	tlsAddr, tlsHealth := grpcHealthServer(t, credentials.NewTLS(cfg))
	c := mustNewChecker(t, Config{})

	probe := func(addr string, f func(*model.HealthCheck)) outcome {
		sp := tlsSpec(model.CheckGRPC, f)
		return c.probe(context.Background(), sp, addr, "")
	}
	withTLS := func(h *model.HealthCheck) { h.GRPCTLS, h.TLSCAPEM = true, ca.PEM }

	for _, tc := range []struct {
		name string
		addr string
		hs   *health.Server
		f    func(*model.HealthCheck)
	}{
		{"plaintext", plainAddr, plainHealth, nil},
		{"tls", tlsAddr, tlsHealth, withTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := tc.hs
			hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			hs.SetServingStatus("orders.v1", healthpb.HealthCheckResponse_SERVING)
			svc := func(name string) func(*model.HealthCheck) {
				return func(h *model.HealthCheck) {
					if tc.f != nil {
						tc.f(h)
					}
					h.GRPCService = name
				}
			}
			check := func(o outcome, class, err string) {
				t.Helper()
				if o.class != class || o.ok != (class == OutcomeSuccess) || (err != "" && o.err != err) {
					t.Fatalf("outcome %+v, want class %q error %q", o, class, err)
				}
				if tc.f != nil && !o.certExpiry.Equal(expiry) {
					t.Fatalf("certificate expiry %v, want %v", o.certExpiry, expiry)
				}
				if tc.f == nil && !o.certExpiry.IsZero() {
					t.Fatalf("certificate expiry %v without TLS", o.certExpiry)
				}
			}
			check(probe(tc.addr, svc("")), OutcomeSuccess, "")
			check(probe(tc.addr, svc("orders.v1")), OutcomeSuccess, "")
			hs.SetServingStatus("orders.v1", healthpb.HealthCheckResponse_NOT_SERVING)
			check(probe(tc.addr, svc("orders.v1")), OutcomeNotServing, "health status NOT_SERVING")
			check(probe(tc.addr, svc("")), OutcomeSuccess, "")
			check(probe(tc.addr, svc("missing")), OutcomeNotServing, "")
			hs.SetServingStatus("orders.v1", healthpb.HealthCheckResponse_SERVING)
			check(probe(tc.addr, svc("orders.v1")), OutcomeSuccess, "")
			hs.SetServingStatus("orders.v1", healthpb.HealthCheckResponse_UNKNOWN)
			check(probe(tc.addr, svc("orders.v1")), OutcomeNotServing, "health status UNKNOWN")
		})
	}

	t.Run("tls failures", func(t *testing.T) {
		o := probe(tlsAddr, func(h *model.HealthCheck) { h.GRPCTLS, h.TLSCAPEM = true, other.PEM })
		if o.ok || o.class != OutcomeTLS || o.err != "certificate signed by an unknown authority" || !o.certExpiry.Equal(expiry) {
			t.Fatalf("untrusted CA: %+v", o)
		}
		o = probe(tlsAddr, func(h *model.HealthCheck) { withTLS(h); h.TLSServerName = "other.test" })
		if o.ok || o.class != OutcomeTLS || o.err != "certificate is not valid for other.test" {
			t.Fatalf("wrong name: %+v", o)
		}
		o = probe(tlsAddr, func(h *model.HealthCheck) { h.GRPCTLS, h.TLSSkipVerify = true, true })
		if !o.ok {
			t.Fatalf("skip verify: %+v", o)
		}
		// Plaintext against the TLS server and TLS against the plaintext one fail.
		if o = probe(tlsAddr, nil); o.ok || o.class == OutcomeSuccess {
			t.Fatalf("plaintext to TLS: %+v", o)
		}
		if o = probe(plainAddr, withTLS); o.ok || o.class != OutcomeTLS {
			t.Fatalf("TLS to plaintext: %+v", o)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		_ = ln.Close()
		if o := probe(closed, nil); o.ok || o.class != OutcomeRefused || o.err != "connection refused" {
			t.Fatalf("outcome %+v", o)
		}
	})
}
