package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The Raft port carries two protocols: hashicorp/raft's RPCs and the servers' own peer
// RPC (package peerrpc: a typed write handed to the leader). Each connection says which
// with its first byte, as Consul's server port does (its RPC type byte): hashicorp/raft
// starts every connection with the type of its first RPC (0 to 4 in v1.7), the peer RPC
// with PeerTag. The stream layer reads that byte of every accepted connection — after
// the TLS handshake, so the peer RPC has the cluster's mutual TLS like Raft — and hands
// a Raft connection to the transport with the byte put back, a peer RPC connection to
// the handler ServePeer installed. A server of a release before the peer RPC takes the
// tag for an unknown Raft RPC and closes the connection before answering anything,
// which peerrpc reads as "not supported" (nothing was sent).

// PeerTag is the first byte of a peer RPC connection on the Raft port.
const PeerTag byte = 0x70

// peerFirstByteTimeout bounds how long an accepted connection may take to send its first
// byte (the TLS handshake has its own bound).
const peerFirstByteTimeout = 10 * time.Second

// muxStreamLayer is the stream layer hashicorp/raft gets: it accepts every connection
// of the Raft listener, and passes on to Raft only those that are not peer RPC.
type muxStreamLayer struct {
	*tcpStreamLayer
	raftConns chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	peer      atomic.Pointer[func(net.Conn)]
}

func newMuxStreamLayer(s *tcpStreamLayer) *muxStreamLayer {
	m := &muxStreamLayer{tcpStreamLayer: s, raftConns: make(chan net.Conn), done: make(chan struct{})}
	go m.acceptLoop()
	return m
}

// acceptLoop accepts connections until the listener closes and routes each in a
// goroutine of its own.
func (m *muxStreamLayer) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := m.tcpStreamLayer.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				m.shut()
				return
			}
			select { // a temporary failure (out of file descriptors): retry, slower
			case <-m.done:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		go m.route(c)
	}
}

// route reads c's first byte and hands c to Raft or to the peer RPC handler.
func (m *muxStreamLayer) route(c net.Conn) {
	if sc, ok := c.(*serverConn); ok && sc.handshake() != nil {
		_ = c.Close() // counted and logged by the handshake
		return
	}
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(peerFirstByteTimeout))
	if _, err := c.Read(b[:]); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if b[0] == PeerTag {
		if h := m.peer.Load(); h != nil {
			(*h)(c)
			return
		}
		// No handler (the node is starting or stopping): a zero byte says "not now",
		// which a caller tells from an older release's silent close (peerrpc.GreetBusy).
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte{0})
		_ = c.Close()
		return
	}
	select {
	case m.raftConns <- &peekedConn{Conn: c, first: b[0], pending: true}:
	case <-m.done:
		_ = c.Close()
	}
}

// Accept returns the next Raft connection.
func (m *muxStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener; the connections already handed out are their owners'.
func (m *muxStreamLayer) Close() error {
	err := m.tcpStreamLayer.Close()
	m.shut()
	return err
}

func (m *muxStreamLayer) shut() { m.closeOnce.Do(func() { close(m.done) }) }

// peekedConn is a connection whose first byte was read: it is read again first.
type peekedConn struct {
	net.Conn
	first   byte
	pending bool
}

func (c *peekedConn) Read(b []byte) (int, error) {
	if c.pending && len(b) > 0 {
		b[0], c.pending = c.first, false
		return 1, nil
	}
	return c.Conn.Read(b)
}

// ServePeer installs the handler of the peer RPC connections this node accepts on its
// Raft port (nil: none, they are answered "not now" and closed). The handler owns the
// connection, whose tag byte has been read; the sender's id follows (DialPeer).
func (n *Node) ServePeer(h func(net.Conn)) {
	if h == nil {
		n.mux.peer.Store(nil)
		return
	}
	n.mux.peer.Store(&h)
}

// DialPeer opens a peer RPC connection to the server at the Raft address addr, with the
// cluster's mutual TLS when the transport has it, and sends the tag byte and this
// server's id (a byte of length, then the id: ServePeer's handler reads it).
func (n *Node) DialPeer(ctx context.Context, addr string) (net.Conn, error) {
	timeout := transportTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	c, err := n.mux.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	hello := append([]byte{PeerTag, byte(len(n.cfg.NodeID))}, n.cfg.NodeID...)
	if _, err := c.Write(hello); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raftnode: peer %s: %w", addr, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// LeaderPeer returns the current leader's id and Raft address (ok false: no leader is
// known).
func (n *Node) LeaderPeer() (id, addr string, ok bool) {
	a, i := n.raft.LeaderWithID()
	if i == "" || a == "" {
		return "", "", false
	}
	return string(i), string(a), true
}
