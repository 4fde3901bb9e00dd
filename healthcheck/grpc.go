package healthcheck

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// OutcomeNotServing: a GRPC health server answered a status other than SERVING, or
// does not know the service asked about.
const OutcomeNotServing = "not serving"

// grpcProbe records what happened below a GRPC probe's RPC: gRPC reports a failed
// connection or handshake as an Unavailable status whose text is not classifiable
// (and may quote the target), so the dialer and the credentials keep their errors.
type grpcProbe struct {
	mu        sync.Mutex
	dialErr   error
	tlsErr    error
	certExpry time.Time
}

func (g *grpcProbe) set(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}

// recordingCreds is TLS transport credentials that keep the handshake's error.
type recordingCreds struct {
	credentials.TransportCredentials
	probe *grpcProbe
}

func (r recordingCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := r.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil {
		r.probe.set(func() { r.probe.tlsErr = err })
	}
	return c, info, err
}

func (r recordingCreds) Clone() credentials.TransportCredentials {
	return recordingCreds{TransportCredentials: r.TransportCredentials.Clone(), probe: r.probe}
}

// probeGRPC calls grpc.health.v1.Health/Check on a connection of its own (closed
// after the call; nothing is pooled across probes) and succeeds when the answer is
// SERVING. The connection goes through the probe policy like every other probe.
func (c *checker) probeGRPC(ctx context.Context, s *spec, addr string) outcome {
	g := &grpcProbe{}
	creds := insecure.NewCredentials()
	if s.tls != nil {
		if s.tls.badCA {
			return outcome{class: OutcomeError, err: "the CA bundle (tlsCaPem) holds no usable certificate"}
		}
		cfg := s.tls.config(addr, func(t time.Time) { g.set(func() { g.certExpry = t }) })
		cfg.NextProtos = []string{"h2"}
		creds = recordingCreds{TransportCredentials: credentials.NewTLS(cfg), probe: g}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(userAgent),
		grpc.WithNoProxy(),
		grpc.WithContextDialer(func(ctx context.Context, target string) (net.Conn, error) {
			conn, err := c.connect(ctx, target)
			if err != nil {
				g.set(func() { g.dialErr = err })
				return nil, err
			}
			return resetOnClose{conn}, nil
		}),
	)
	if err != nil {
		return outcome{class: OutcomeError, err: "invalid gRPC target"}
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: s.hc.GRPCService})
	g.mu.Lock()
	dialErr, tlsErr, expiry := g.dialErr, g.tlsErr, g.certExpry
	g.mu.Unlock()
	if err != nil {
		var o outcome
		switch code := status.Code(err); {
		case dialErr != nil:
			o = dialFailed(dialErr)
		case tlsErr != nil:
			o = tlsFailed(tlsErr, s.tls.name(addr))
		case code == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded):
			o = outcome{class: OutcomeTimeout, err: "timeout"}
		case code == codes.NotFound:
			o = outcome{class: OutcomeNotServing, err: "health status SERVICE_UNKNOWN (the health server does not know the service)"}
		case code == codes.Unimplemented:
			o = outcome{class: OutcomeError, err: "the server does not implement grpc.health.v1.Health"}
		case code == codes.Unavailable:
			o = outcome{class: OutcomeError, err: "gRPC connection failed (Unavailable)"}
		default:
			o = outcome{class: OutcomeError, err: "health check failed with gRPC code " + code.String()}
		}
		o.certExpiry = expiry
		return o
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return outcome{class: OutcomeNotServing, err: "health status " + st.String(), certExpiry: expiry}
	}
	return outcome{ok: true, certExpiry: expiry}
}
