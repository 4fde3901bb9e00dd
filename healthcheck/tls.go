package healthcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"time"
)

// OutcomeTLS: the TLS handshake failed (the certificate is not trusted, not valid for
// the name, expired, or the handshake itself failed).
const OutcomeTLS = "tls"

// tlsOptions is a spec's TLS configuration, prepared once.
type tlsOptions struct {
	serverName string         // the configured name; empty: the instance's host
	skipVerify bool           // accept any certificate
	roots      *x509.CertPool // nil: the system roots
	badCA      bool           // the CA bundle did not parse (validation should prevent it)
}

func newTLSOptions(serverName string, skipVerify bool, caPEM string) *tlsOptions {
	o := &tlsOptions{serverName: serverName, skipVerify: skipVerify}
	if caPEM != "" {
		o.roots = x509.NewCertPool()
		o.badCA = !o.roots.AppendCertsFromPEM([]byte(caPEM))
	}
	return o
}

// config returns the client configuration of one probe of addr. Go's own verification
// is replaced by one that does the same (chain to the roots, name, validity) but first
// passes the leaf certificate's expiry to record, so that a result shows the expiry of
// a certificate that failed verification, an expired one in particular.
func (o *tlsOptions) config(addr string, record func(time.Time)) *tls.Config {
	name := o.name(addr)
	return &tls.Config{
		ServerName:         name,
		InsecureSkipVerify: true, // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errNoCertificate
			}
			record(cs.PeerCertificates[0].NotAfter)
			if o.skipVerify {
				return nil
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: o.roots, Intermediates: inter, DNSName: name,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			return err
		},
	}
}

// name is the name the certificate is verified against: the configured one, else the
// host of addr.
func (o *tlsOptions) name(addr string) string {
	if o.serverName != "" {
		return o.serverName
	}
	host, _, _ := net.SplitHostPort(addr)
	return host
}

var errNoCertificate = errors.New("no certificate")

// handshake runs a TLS handshake over conn within ctx. It returns the TLS connection,
// the peer leaf certificate's expiry (zero if none was received) and, on failure, the
// outcome.
func (o *tlsOptions) handshake(ctx context.Context, conn net.Conn, addr string) (*tls.Conn, time.Time, *outcome) {
	if o.badCA {
		return nil, time.Time{}, &outcome{class: OutcomeError, err: "the CA bundle (tlsCaPem) holds no usable certificate"}
	}
	var expiry time.Time
	tc := tls.Client(conn, o.config(addr, func(t time.Time) { expiry = t }))
	if err := tc.HandshakeContext(ctx); err != nil {
		out := tlsFailed(err, o.name(addr))
		out.certExpiry = expiry
		return nil, expiry, &out
	}
	return tc, expiry, nil
}

// tlsFailed classifies a failed handshake. The text names what Roster checked, never
// what the certificate says (it comes from the target).
func tlsFailed(err error, name string) outcome {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		alert    tls.AlertError
		rec      tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return outcome{class: OutcomeTLS, err: "certificate signed by an unknown authority"}
	case errors.As(err, &hostname):
		return outcome{class: OutcomeTLS, err: "certificate is not valid for " + name}
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return outcome{class: OutcomeTLS, err: "certificate expired or not yet valid"}
		}
		return outcome{class: OutcomeTLS, err: "certificate is not valid for a TLS server"}
	case errors.Is(err, errNoCertificate):
		return outcome{class: OutcomeTLS, err: "the server sent no certificate"}
	case errors.As(err, &alert):
		return outcome{class: OutcomeTLS, err: "the server refused the handshake (TLS alert)"}
	case errors.As(err, &rec):
		return outcome{class: OutcomeTLS, err: "the server does not speak TLS"}
	case isTimeout(err), errors.Is(err, net.ErrClosed):
		return outcome{class: OutcomeTimeout, err: "timeout"}
	}
	var ne *net.OpError
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return readFailed(err)
	}
	return outcome{class: OutcomeTLS, err: "TLS handshake failed"}
}
