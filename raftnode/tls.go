package raftnode

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
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
type serverConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func newServerConn(c net.Conn, cfg *tls.Config) *serverConn {
	return &serverConn{Conn: tls.Server(c, cfg)}
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		c.err = c.Conn.Handshake()
		_ = c.Conn.SetDeadline(time.Time{})
	})
	return c.err
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
