package raftnode

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// TransportTLS makes the Raft transport mutual TLS: every accepted connection is a TLS
// server connection under Server, every dialed one a TLS client connection under
// Client. Server must require and verify client certificates, and Client must verify
// the server's (tlsutil.NodeCerts.RaftServer and RaftClient do both against the cluster
// CA), so that a process without a certificate of the cluster's CA gets no RPC read and
// is sent none.
type TransportTLS struct {
	Server, Client *tls.Config
}

// raftHandshakeTimeout bounds the TLS handshake of an accepted Raft connection, which
// happens on its first read or write: a peer that connects and sends nothing is cut off.
const raftHandshakeTimeout = 10 * time.Second

// dialTLS dials addr and completes the TLS handshake within timeout.
func (s *tcpStreamLayer) dialTLS(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.tls.Client)
}

// serverConn is an accepted Raft connection whose TLS handshake runs, within
// raftHandshakeTimeout, on the first read or write: the transport's accept loop, which
// hands each connection to a goroutine of its own, never waits for a handshake.
//
// A failed handshake (no certificate of the cluster's CA, plain text, a port scanner, a
// TCP health check) is counted and logged at debug level, at most once per
// handshakeLogEvery, and reads as io.EOF: Raft's transport would log every one as an
// ERROR, and anyone who reaches the port could fill the log.
type serverConn struct {
	*tls.Conn
	refused *handshakeFailures
	once    sync.Once
	err     error
}

func newServerConn(c net.Conn, cfg *tls.Config, refused *handshakeFailures) *serverConn {
	return &serverConn{Conn: tls.Server(c, cfg), refused: refused}
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		err := c.Conn.Handshake()
		_ = c.Conn.SetDeadline(time.Time{})
		if err != nil {
			c.refused.failed(c.RemoteAddr(), err)
			err = io.EOF
		}
		c.err = err
	})
	return c.err
}

// handshakeLogEvery is the least time between two log lines of refused handshakes.
const handshakeLogEvery = 10 * time.Second

// handshakeFailures counts refused Raft handshakes and logs them, rate-limited.
type handshakeFailures struct {
	count prometheus.Counter
	log   *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newHandshakeFailures(count prometheus.Counter, log *slog.Logger) *handshakeFailures {
	if log == nil {
		log = slog.Default()
	}
	return &handshakeFailures{count: count, log: log.With("component", "raft-tls")}
}

// failed records one refused handshake; nil does nothing.
func (h *handshakeFailures) failed(remote net.Addr, err error) {
	if h == nil {
		return
	}
	if h.count != nil {
		h.count.Inc()
	}
	now := time.Now()
	h.mu.Lock()
	if !h.last.IsZero() && now.Sub(h.last) < handshakeLogEvery {
		h.suppressed++
		h.mu.Unlock()
		return
	}
	suppressed := h.suppressed
	h.last, h.suppressed = now, 0
	h.mu.Unlock()
	h.log.Debug("raft: TLS handshake refused (roster_raft_tls_handshake_failures_total counts them all)",
		"remote", remote.String(), "err", err, "not_logged_since_last", suppressed)
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
