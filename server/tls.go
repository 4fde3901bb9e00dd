package server

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/tlsutil"
)

// TLSConfig turns TLS on when its files are set (docs/security.md): the HTTP API is
// served over HTTPS only, Raft over mutual TLS, requests to other nodes (forwarding to
// the leader, joins, state checks) over HTTPS with the node's certificate as client
// certificate, and the Nacos gRPC API over TLS. Every peer's certificate must be signed
// by the CA of CAFile; between nodes the chain is checked, not the host name.
type TLSConfig struct {
	// CertFile and KeyFile are the node's certificate and key (PEM), CAFile the cluster
	// CA's certificate(s). All three or none.
	CertFile, KeyFile, CAFile string
	// VerifyIncoming requires a client certificate signed by the CA on the HTTP and gRPC
	// APIs. Without it a client certificate is optional (verified when sent); joining
	// the cluster always needs one.
	VerifyIncoming bool
}

// Enabled reports whether any TLS file is set.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" }

// validate refuses a partial TLS configuration.
func (c TLSConfig) validate() error {
	if !c.Enabled() {
		if c.VerifyIncoming {
			return errors.New("tls-verify-incoming: needs tls-cert-file, tls-key-file and tls-ca-file")
		}
		return nil
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"tls-cert-file", c.CertFile}, {"tls-key-file", c.KeyFile}, {"tls-ca-file", c.CAFile}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tls-cert-file, tls-key-file and tls-ca-file go together: %s missing", strings.Join(missing, " and "))
	}
	return nil
}

// certExpiryWarning is how long before its certificate expires a node warns at start.
const certExpiryWarning = 30 * 24 * time.Hour

// loadTLS reads the node's TLS files (nil when TLS is off).
func loadTLS(c TLSConfig) (*tlsutil.NodeCerts, error) {
	if !c.Enabled() {
		return nil, nil
	}
	return tlsutil.LoadNode(tlsutil.Files{CertFile: c.CertFile, KeyFile: c.KeyFile, CAFile: c.CAFile})
}

// raftTLS is the Raft transport's mutual TLS (nil when TLS is off).
func (s *Server) raftTLS() *raftnode.TransportTLS {
	if s.certs == nil {
		return nil
	}
	return &raftnode.TransportTLS{Server: s.certs.RaftServer(), Client: s.certs.RaftClient()}
}

// grpcTLS is the Nacos gRPC server's TLS (nil when TLS is off).
func (s *Server) grpcTLS() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return s.certs.GRPCServer(s.cfg.TLS.VerifyIncoming)
}

// peerTLS is the client configuration of requests to other nodes (nil when TLS is off).
func (s *Server) peerTLS() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return s.certs.PeerClient()
}

// logTLS says that TLS is on, and warns of a certificate that expires soon.
func (s *Server) logTLS() {
	if s.certs == nil {
		return
	}
	s.log.Info("TLS on: HTTPS API, mutual TLS between nodes", "certificate", s.certs.Subject(),
		"expires", s.certs.NotAfter().UTC().Format(time.RFC3339), "verify_incoming", s.cfg.TLS.VerifyIncoming)
	if left := time.Until(s.certs.NotAfter()); left < certExpiryWarning {
		s.log.Warn("the node's certificate expires soon: create a new one and restart the node (docs/security.md)",
			"expires", s.certs.NotAfter().UTC().Format(time.RFC3339))
	}
}

// httpErrorLog is the HTTPS server's error log: refused TLS handshakes (clients without
// the CA or a certificate, plain HTTP, port scanners and TCP health checks) at debug
// level, anything else as a warning.
func httpErrorLog(l *slog.Logger) *log.Logger {
	return log.New(httpLogWriter{l.With("component", "https")}, "", 0)
}

type httpLogWriter struct{ l *slog.Logger }

func (w httpLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.l.Debug(msg)
	} else {
		w.l.Warn(msg)
	}
	return len(p), nil
}

// tlsAdvertise is the HTTP address the node advertises with TLS on: an https URL. An
// address given without a scheme gets https://; http:// is refused, since the API
// serves no plain HTTP.
func tlsAdvertise(explicit, bound, raftAdv, raftBind string) (string, error) {
	rest, hasScheme := strings.CutPrefix(explicit, "https://")
	if !hasScheme && strings.Contains(explicit, "://") {
		return "", fmt.Errorf("%q: with TLS on the API is served over HTTPS only; give host:port or https://host:port", explicit)
	}
	addr, err := advertise(rest, bound, raftAdv, raftBind)
	if err != nil {
		return "", err
	}
	return "https://" + addr, nil
}

// checkTLSJoin refuses an http:// join address with TLS on (an address without a scheme
// is dialed over HTTPS: peerURL).
func checkTLSJoin(join string) error {
	if strings.Contains(join, "://") && !strings.HasPrefix(join, "https://") {
		return fmt.Errorf("%q: with TLS on the cluster is reached over HTTPS; give host:port or https://host:port", join)
	}
	return nil
}

// peerURL is the address of another node's API as the node dials it: with TLS on, an
// address without a scheme (recorded before the cluster turned TLS on) is dialed over
// HTTPS.
func (s *Server) peerURL(addr string) string {
	if s.certs != nil && addr != "" && !strings.Contains(addr, "://") {
		return "https://" + addr
	}
	return addr
}

// joinPath is the route that adds a server to the cluster.
const joinPath = "/v1/cluster/join"

// hstsValue is the Strict-Transport-Security of every HTTPS response: browsers that
// reached the node over HTTPS keep to HTTPS for a year. No includeSubDomains: the
// node's name says nothing about the other hosts under its domain.
const hstsValue = "max-age=31536000"

// strictTransportSecurity sets Strict-Transport-Security on every response to a request
// that came over TLS (native API, Nacos HTTP API, console, errors); never over plain
// HTTP, where browsers ignore it and it would make no sense.
func strictTransportSecurity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		next.ServeHTTP(w, r)
	})
}

// requireNodeCertToJoin refuses, with 403, a join request whose connection presented no
// certificate signed by the cluster CA: with TLS on only a holder of such a certificate
// may add a server, as only one may take part in Raft. The HTTPS server has verified a
// certificate that was sent, so one verified chain is the proof.
func requireNodeCertToJoin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && (r.URL.Path == joinPath || r.URL.RawPath == joinPath) &&
			(r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{
				Code:    api.CodeForbidden,
				Message: "joining the cluster needs a client certificate signed by the cluster's CA",
			}})
			return
		}
		next.ServeHTTP(w, r)
	})
}
