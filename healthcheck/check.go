package healthcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rosterhq/roster/model"
)

const (
	userAgent = "roster-healthcheck"
	// minInterval guards the scheduler against a spec that escaped validation.
	minInterval = 10 * time.Millisecond
	// maxHeaderBytes bounds the status line and headers an HTTP probe reads.
	maxHeaderBytes = 64 << 10
)

// spec is a cluster's health-check spec prepared for probing. It is immutable once built
// and shared by the cluster's targets.
type spec struct {
	hc       model.HealthCheck // with defaults applied
	interval time.Duration
	timeout  time.Duration
	header   http.Header // the configured headers plus User-Agent, minus Host
	host     string      // a configured Host header
	tls      *tlsOptions // checks that do a TLS handshake (model.HealthCheck.TLS)
	// deregAfter is the cluster's DeregisterAfter (0: never). It is not part of how
	// instances are probed: equal ignores it and adopt updates it in place.
	deregAfter time.Duration
}

func newSpec(hc model.HealthCheck) *spec {
	hc = hc.WithDefaults()
	s := &spec{hc: hc, interval: max(hc.Interval.D(), minInterval), timeout: hc.Timeout.D(), deregAfter: max(hc.DeregisterAfter.D(), 0)}
	if s.timeout <= 0 || s.timeout > s.interval {
		s.timeout = s.interval
	}
	if hc.TLS() {
		s.tls = newTLSOptions(hc.TLSServerName, hc.TLSSkipVerify, hc.TLSCAPEM)
	}
	if hc.Type.IsHTTP() {
		s.header = make(http.Header, len(hc.Headers)+1)
		for k, v := range hc.Headers {
			if strings.EqualFold(k, "Host") {
				s.host = v
				continue
			}
			s.header.Set(k, v)
		}
		if s.header.Get("User-Agent") == "" {
			s.header.Set("User-Agent", userAgent)
		}
	}
	return s
}

// probed reports whether instances under this spec are probed (every type but NONE).
// Unknown types are treated as NONE: health stays what the API set.
func (s *spec) probed() bool {
	switch s.hc.Type {
	case model.CheckTCP, model.CheckHTTP, model.CheckHTTPS, model.CheckTLS, model.CheckGRPC, model.CheckMySQL:
		return true
	}
	return false
}

// adopt gives s the deregistration delay of o, a spec that probes the same way, and
// reports whether it changed.
func (s *spec) adopt(o *spec) bool {
	if s.deregAfter == o.deregAfter {
		return false
	}
	s.deregAfter, s.hc.DeregisterAfter = o.deregAfter, o.hc.DeregisterAfter
	return true
}

// equal reports whether two specs probe the same way (DeregisterAfter aside).
func (s *spec) equal(o *spec) bool {
	if s == o {
		return true
	}
	a, b := s.hc, o.hc
	if a.Type != b.Type || a.Port != b.Port || a.Path != b.Path || a.Interval != b.Interval ||
		a.Timeout != b.Timeout || a.Rise != b.Rise || a.Fall != b.Fall || a.Confirm.Majority() != b.Confirm.Majority() ||
		a.TLSServerName != b.TLSServerName || a.TLSSkipVerify != b.TLSSkipVerify || a.TLSCAPEM != b.TLSCAPEM ||
		a.GRPCService != b.GRPCService || a.GRPCTLS != b.GRPCTLS ||
		a.User != b.User || a.Password != b.Password || a.Query != b.Query ||
		len(a.Headers) != len(b.Headers) || len(a.ExpectedStatus) != len(b.ExpectedStatus) {
		return false
	}
	for k, v := range a.Headers {
		if w, ok := b.Headers[k]; !ok || w != v {
			return false
		}
	}
	for i := range a.ExpectedStatus {
		if a.ExpectedStatus[i] != b.ExpectedStatus[i] {
			return false
		}
	}
	return true
}

// probeAddr is the host:port a probe connects to: the spec's port unless it is 0, then
// the instance's own. IPv6 addresses are bracketed; DNS names are resolved at dial time.
func probeAddr(ref model.InstanceRef, s *spec) string {
	port := ref.Port
	if s.hc.Port != 0 {
		port = s.hc.Port
	}
	return net.JoinHostPort(ref.IP, strconv.Itoa(port))
}

// probeTarget is where a probe of ref under s goes: the address it connects to, and the
// URL of an HTTP or HTTPS check ("" for the others).
func probeTarget(ref model.InstanceRef, s *spec) (addr, url string) {
	addr = probeAddr(ref, s)
	if s.hc.Type.IsHTTP() {
		url = probeURL(addr, s)
	}
	return addr, url
}

// probeURL is the URL of an HTTP or HTTPS probe.
func probeURL(addr string, s *spec) string {
	if s.hc.Type == model.CheckHTTPS {
		return "https://" + addr + s.hc.Path
	}
	return "http://" + addr + s.hc.Path
}

// outcome is what one probe observed.
type outcome struct {
	ok      bool
	class   string // OutcomeSuccess or a failure class (outcome.go)
	status  int    // HTTP status, 0 if none
	err     string // written by the prober; never bytes read from the target
	latency time.Duration
	// certExpiry is the peer leaf certificate's NotAfter (TLS handshakes; zero if none).
	certExpiry time.Time
}

// dialFailed is the outcome of a probe whose connection could not be opened or written.
func dialFailed(err error) outcome {
	class, msg := classifyDial(err)
	return outcome{class: class, err: msg}
}

// readFailed is the outcome of a probe whose response could not be read.
func readFailed(err error) outcome {
	class, msg := classifyRead(err)
	return outcome{class: class, err: msg}
}

// checker performs single probes. It is safe for concurrent use.
//
// Every probe opens a fresh connection and closes it with a reset (linger 0), so a probe
// tests that the instance accepts connections now, and probes leave no TIME_WAIT sockets
// behind on either side. HTTP probes do not go through an http.Transport: there is no
// connection pool at all, hence no per-host or total limit that could starve probes
// (Nacos#9474: a pool of 20 made healthy instances time out), no idle connection pinned
// per instance (10,000 instances would hold 10,000 descriptors on the leader and on the
// instances), and no proxy from the environment. GRPC and MYSQL probes likewise open
// one connection of their own through the same dialer, handed to grpc-go or the MySQL
// driver, and close it when the probe ends. A probe writes one GET with
// "Connection: close" and reads one response with net/http's own request writer and
// response parser; redirects are reported as their status, never followed. The only
// bound on concurrent probes is Config.MaxConcurrent.
//
// Every connection goes through the probe Policy: the default dialer checks each
// resolved address in its Control hook, before the socket connects; an injected
// Config.Dial is given only addresses whose IP literal the policy allows (it
// resolves names itself, and must enforce the policy on what they resolve to).
type checker struct {
	dial    DialFunc
	policy  Policy
	maxBody int64
}

func newChecker(cfg Config) *checker {
	dial := cfg.Dial
	if dial == nil {
		dial = cfg.Policy.Dialer()
	}
	return &checker{dial: dial, policy: cfg.Policy, maxBody: cfg.MaxBodyBytes}
}

// connect opens a probe connection to addr, refusing an IP literal outside the policy
// without calling the dialer.
func (c *checker) connect(ctx context.Context, addr string) (net.Conn, error) {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil && !c.policy.Allowed(ip) {
			return nil, &DeniedError{Addr: ip.Unmap().WithZone("")}
		}
	}
	return c.dial(ctx, "tcp", addr)
}

// probe runs one check of s's type against addr, or rawURL for HTTP and HTTPS (whose
// connection goes to addr), bounded by the spec's timeout and by ctx.
func (c *checker) probe(ctx context.Context, s *spec, addr, rawURL string) outcome {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	var o outcome
	switch s.hc.Type {
	case model.CheckTCP:
		o = c.probeTCP(ctx, addr)
	case model.CheckHTTP, model.CheckHTTPS:
		o = c.probeHTTP(ctx, s, addr, rawURL)
	case model.CheckTLS:
		o = c.probeTLS(ctx, s, addr)
	case model.CheckGRPC:
		o = c.probeGRPC(ctx, s, addr)
	case model.CheckMySQL:
		o = c.probeMySQL(ctx, s, addr)
	default:
		o = outcome{class: OutcomeError, err: fmt.Sprintf("check type %q is not probed", s.hc.Type)}
	}
	o.latency = time.Since(start)
	if o.ok {
		o.class = OutcomeSuccess
	} else if o.class != OutcomeDenied && (o.class == OutcomeTimeout || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		o.class, o.err = OutcomeTimeout, fmt.Sprintf("timeout after %s", s.timeout)
	}
	return o
}

// resetOnClose is a probe connection handed to a client library (gRPC, the MySQL
// driver): its Close resets, as every probe connection's does.
type resetOnClose struct{ net.Conn }

func (c resetOnClose) Close() error {
	closeReset(c.Conn)
	return nil
}

// closeReset closes a probe connection with a reset instead of a FIN handshake.
func closeReset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// probeTCP succeeds when a connection is established.
func (c *checker) probeTCP(ctx context.Context, addr string) outcome {
	conn, err := c.connect(ctx, addr)
	if err != nil {
		return dialFailed(err)
	}
	closeReset(conn)
	return outcome{ok: true}
}

// probeTLS succeeds when a connection is established and the TLS handshake completes,
// the server's certificate verified under the spec's TLS options.
func (c *checker) probeTLS(ctx context.Context, s *spec, addr string) outcome {
	conn, err := c.connect(ctx, addr)
	if err != nil {
		return dialFailed(err)
	}
	defer closeReset(conn)
	stop := deadlineFromContext(ctx, conn)
	defer stop()
	_, expiry, failed := s.tls.handshake(ctx, conn, addr)
	if failed != nil {
		return *failed
	}
	return outcome{ok: true, certExpiry: expiry}
}

// deadlineFromContext sets conn's deadline to ctx's and makes a cancellation of ctx
// interrupt conn's reads and writes; the returned function stops the latter.
func deadlineFromContext(ctx context.Context, conn net.Conn) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// probeHTTP succeeds when GET answers with a status the spec expects (over TLS for
// HTTPS, after a verified handshake). Interim (1xx) responses are skipped. Up to
// maxBody bytes of the body are read and discarded; the rest is not read.
func (c *checker) probeHTTP(ctx context.Context, s *spec, addr, rawURL string) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return outcome{class: OutcomeError, err: "invalid probe URL"}
	}
	req.Header = s.header // only read by Request.Write
	req.Host = s.host
	req.Close = true
	conn, err := c.connect(ctx, addr)
	if err != nil {
		return dialFailed(err)
	}
	defer closeReset(conn)
	stop := deadlineFromContext(ctx, conn)
	defer stop()
	var rw io.ReadWriter = conn
	var expiry time.Time
	if s.tls != nil {
		tc, exp, failed := s.tls.handshake(ctx, conn, addr)
		if failed != nil {
			return *failed
		}
		rw, expiry = tc, exp
	}
	if err := req.Write(rw); err != nil {
		o := dialFailed(err)
		o.certExpiry = expiry
		return o
	}
	// Bound everything read from the connection: headers, interim responses and the
	// body share one budget.
	br := bufio.NewReaderSize(io.LimitReader(rw, maxHeaderBytes+c.maxBody), 4096)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			o := readFailed(err)
			o.certExpiry = expiry
			return o
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, c.maxBody))
		_ = resp.Body.Close()
		if !s.hc.Healthy(resp.StatusCode) {
			want := "200-399"
			if len(s.hc.ExpectedStatus) > 0 {
				want = fmt.Sprint(s.hc.ExpectedStatus)
			}
			return outcome{class: OutcomeStatus, status: resp.StatusCode, certExpiry: expiry,
				err: fmt.Sprintf("status %d, expected %s", resp.StatusCode, want)}
		}
		return outcome{ok: true, status: resp.StatusCode, certExpiry: expiry}
	}
}
