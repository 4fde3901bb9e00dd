// Package peerrpc is the servers' own RPC: a follower hands a typed write to the leader
// over it, and asks the leader for the index a consistent read must have applied
// (registry.Peer), on the Raft port and under the cluster's mutual TLS
// (raftnode.Node.DialPeer and ServePeer share the port with hashicorp/raft, told apart
// by the connection's first byte).
//
// A connection carries one call at a time: the client names itself (its server id,
// after the tag byte), the server greets it with a byte, then answers each request in
// order. Requests and answers are MessagePack, as Raft's
// own RPCs; the write itself is in the state machine's encoding, encoded once by the
// node that received it. Idle connections are kept for the next call.
//
// What a failed call means is decided here, because only the transport knows whether
// the request left: a connection that could not be opened, a server that said it is not
// ready, an idle connection the leader had closed before the request was written, or a
// write that failed, reached no leader (registry.ErrNotSent: not applied). A server that
// closes the connection without greeting runs a release without this RPC
// (registry.ErrLegacyLeader). A request written whose answer did not come has an unknown
// outcome (registry.ErrUnavailable).
package peerrpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/registry"
)

// Greeting bytes: the server's first byte on a new connection.
const (
	greetReady byte = 'R' // the server serves calls
	// GreetBusy is sent, and the connection closed, by a node that has no handler yet
	// (starting or stopping): nothing was sent, the caller may retry.
	GreetBusy byte = 0
)

// idleTimeout closes a server connection that carries no call for this long.
const idleTimeout = 2 * time.Minute

// legacyFor is how long a leader found to run a release without the RPC is not asked
// again (each ask makes it log an error).
const legacyFor = 10 * time.Second

// Calls: a forwarded write (the zero Op, so that the first release's requests read as
// writes), or a read index.
const (
	opWrite     = ""
	opReadIndex = "read_index"
)

// request is a call on the wire.
type request struct {
	Op string
	// Consistency is a read index's mode (registry.Consistency).
	Consistency string
	Command     []byte
	Secret      string
	RequestID   string
	From        string
	// TimeoutMillis bounds the leader's work on it.
	TimeoutMillis int64
}

// response is the leader's answer.
type response struct {
	Index uint64
	Err   *wireError
}

func newHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	return h
}

// Dialer opens a peer RPC connection to a server's Raft address (raftnode.Node.DialPeer).
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// Leaders says which server leads and where it listens (raftnode.Node.LeaderPeer).
type Leaders func() (id, addr string, ok bool)

// Client forwards writes to the leader. It implements registry.Peer.
type Client struct {
	dial    Dialer
	leaders Leaders
	h       *codec.MsgpackHandle
	mu      sync.Mutex
	idle    map[string][]*clientConn // by address
	legacy  map[string]time.Time     // addresses found without the RPC, until
	slots   map[string]chan struct{} // calls in flight, by address (at most maxConns)
	// maxConns bounds the calls in flight to one server, so the connections open to it.
	maxConns int
	closed   bool
}

// NewClient returns a Client.
func NewClient(dial Dialer, leaders Leaders) *Client {
	return &Client{dial: dial, leaders: leaders, h: newHandle(), idle: map[string][]*clientConn{}, legacy: map[string]time.Time{},
		slots: map[string]chan struct{}{}, maxConns: MaxConnsPerServer}
}

// Leader returns the id of the leader this node knows.
func (c *Client) Leader() (string, bool) {
	id, _, ok := c.leaders()
	return id, ok
}

// MaxConnsPerServer bounds the calls a node has in flight to one server, and so the
// connections it opens to the leader: a burst beyond it waits for a call to end (within
// its deadline; past it, the call was not sent). Every connection is kept for the next
// call.
const MaxConnsPerServer = 128

type clientConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	enc *codec.Encoder
	dec *codec.Decoder
}

// Forward sends f to the leader id (registry.Peer).
func (c *Client) Forward(ctx context.Context, id string, f registry.Forwarded) (uint64, error) {
	req := request{Command: f.Command, Secret: f.Secret, RequestID: f.RequestID, From: f.From}
	return c.send(ctx, id, req, "the write was sent to the leader %s and no answer came, so its outcome is unknown")
}

// ReadIndex asks the leader id for the index a read in mode must have applied here
// (registry.Peer). A read changes nothing, so any failure may be retried by the caller.
func (c *Client) ReadIndex(ctx context.Context, id string, mode registry.Consistency) (uint64, error) {
	req := request{Op: opReadIndex, Consistency: string(mode), RequestID: registry.RequestID(ctx)}
	return c.send(ctx, id, req, "no read index from the leader %s")
}

// send makes one call to the leader id, on an idle connection or a new one, and
// classifies a failure: not sent, a leader without the RPC, or (unanswered, described
// by unanswered with the leader's id) an unknown outcome.
func (c *Client) send(ctx context.Context, id string, req request, unanswered string) (uint64, error) {
	lid, addr, ok := c.leaders()
	if !ok || lid != id {
		return 0, fmt.Errorf("%w: the leader changed before the call was sent", registry.ErrNotSent)
	}
	if c.isLegacy(addr) {
		return 0, fmt.Errorf("%w: %s at %s", registry.ErrLegacyLeader, id, addr)
	}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = max(1, time.Until(dl).Milliseconds())
	}
	release, err := c.slot(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer release()
	cc, err := c.get(ctx, addr)
	if err != nil {
		if errors.Is(err, registry.ErrLegacyLeader) {
			c.markLegacy(addr)
		}
		return 0, err
	}
	resp, sent, err := cc.call(ctx, req)
	if err != nil {
		_ = cc.c.Close()
		if !sent {
			return 0, fmt.Errorf("%w: %s: %v", registry.ErrNotSent, id, err)
		}
		return 0, fmt.Errorf("%w: "+unanswered+": %v", registry.ErrUnavailable, id, err)
	}
	c.put(addr, cc)
	return resp.Index, resp.Err.decode()
}

// get returns an idle connection to addr the server has not closed, or a new one once
// greeted.
func (c *Client) get(ctx context.Context, addr string) (*clientConn, error) {
	c.mu.Lock()
	for list := c.idle[addr]; len(list) > 0; list = c.idle[addr] {
		cc := list[len(list)-1]
		c.idle[addr] = list[:len(list)-1]
		if peerClosed(cc.c) {
			_ = cc.c.Close() // closed by the server while idle: never used
			continue
		}
		c.mu.Unlock()
		return cc, nil
	}
	c.mu.Unlock()
	conn, err := c.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", registry.ErrNotSent, err)
	}
	cc := &clientConn{c: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	cc.enc, cc.dec = codec.NewEncoder(cc.w, c.h), codec.NewDecoder(cc.r, c.h)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	b, err := cc.r.ReadByte()
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case errors.Is(err, io.EOF):
		// An orderly close before any answer: a release without the peer RPC read the
		// tag as an unknown Raft RPC (raftnode's stream layer). A reset instead means the
		// address has no server (a proxy or firewall answered for a port nobody listens
		// on, a node that died or is cut off): like a refused dial, not sent.
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s closed the connection without a greeting", registry.ErrLegacyLeader, addr)
	case isReset(err):
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s reset the connection before its greeting", registry.ErrNotSent, addr)
	case err != nil:
		_ = conn.Close()
		return nil, fmt.Errorf("%w: no greeting from %s: %v", registry.ErrNotSent, addr, err)
	case b == GreetBusy:
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s does not serve the peer RPC yet", registry.ErrNotSent, addr)
	case b != greetReady:
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s greeted with %#x", registry.ErrNotSent, addr, b)
	}
	return cc, nil
}

// call writes req and reads the answer; sent says whether the request may have reached
// the server (a write that failed did not: the server reads whole requests only).
func (cc *clientConn) call(ctx context.Context, req request) (response, bool, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(registry.DefaultRequestTimeout)
	}
	_ = cc.c.SetDeadline(dl)
	defer func() { _ = cc.c.SetDeadline(time.Time{}) }()
	if err := cc.enc.Encode(&req); err != nil {
		return response{}, false, err
	}
	if err := cc.w.Flush(); err != nil {
		return response{}, false, err
	}
	var resp response
	if err := cc.dec.Decode(&resp); err != nil {
		return response{}, true, err
	}
	return resp, true, nil
}

// slot takes one of the calls in flight to addr, waiting while all are taken.
func (c *Client) slot(ctx context.Context, addr string) (release func(), err error) {
	c.mu.Lock()
	ch := c.slots[addr]
	if ch == nil {
		ch = make(chan struct{}, c.maxConns)
		c.slots[addr] = ch
	}
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %d calls to %s in flight: %v", registry.ErrNotSent, c.maxConns, addr, ctx.Err())
	}
}

func (c *Client) put(addr string, cc *clientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= c.maxConns {
		_ = cc.c.Close()
		return
	}
	c.idle[addr] = append(c.idle[addr], cc)
}

func (c *Client) isLegacy(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.legacy[addr]
	if ok && time.Now().After(until) {
		delete(c.legacy, addr)
		return false
	}
	return ok
}

func (c *Client) markLegacy(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.legacy[addr] = time.Now().Add(legacyFor)
}

// Close closes the idle connections; calls in flight finish.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, list := range c.idle {
		for _, cc := range list {
			_ = cc.c.Close()
		}
		delete(c.idle, addr)
	}
}

// Handler serves the calls (*registry.Registry implements it).
type Handler interface {
	// ServeForwarded serves a forwarded write: its index or its error.
	ServeForwarded(ctx context.Context, f registry.Forwarded) (uint64, error)
	// ServeReadIndex answers the index a read in mode must have applied.
	ServeReadIndex(ctx context.Context, mode registry.Consistency) (uint64, error)
}

// Server answers the peer RPC connections a node accepts.
type Server struct {
	handle Handler
	h      *codec.MsgpackHandle
	log    *slog.Logger
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a Server that answers calls with handle.
func NewServer(handle Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{handle: handle, h: newHandle(), log: log, conns: map[net.Conn]struct{}{}}
}

// ServeConn serves the calls of one connection until it closes (raftnode.Node.ServePeer).
func (s *Server) ServeConn(c net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_, _ = c.Write([]byte{GreetBusy})
		_ = c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
		s.wg.Done()
	}()
	w, r := bufio.NewWriter(c), bufio.NewReader(c)
	enc, dec := codec.NewEncoder(w, s.h), codec.NewDecoder(r, s.h)
	// The sender's id (raftnode.DialPeer): a byte of length, then the id.
	_ = c.SetReadDeadline(time.Now().Add(idleTimeout))
	n, err := r.ReadByte()
	if err != nil {
		return
	}
	sender := make([]byte, n)
	if _, err := io.ReadFull(r, sender); err != nil {
		return
	}
	if err := w.WriteByte(greetReady); err != nil {
		return
	}
	if err := w.Flush(); err != nil {
		return
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(idleTimeout))
		var req request
		if err := dec.Decode(&req); err != nil {
			return // closed, idle, or unreadable: the client sees the connection end
		}
		_ = c.SetReadDeadline(time.Time{})
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 || timeout > registry.DefaultRequestTimeout+registry.DefaultLeaderHold {
			timeout = registry.DefaultRequestTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if req.From == "" {
			req.From = string(sender)
		}
		idx, err := s.serve(ctx, req)
		cancel()
		if err != nil && !errors.Is(err, registry.ErrNotLeader) {
			s.log.Debug("a peer call was refused", "from", req.From, "request_id", req.RequestID, "err", err)
		}
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
		if err := enc.Encode(&response{Index: idx, Err: encodeError(err)}); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
		_ = c.SetWriteDeadline(time.Time{})
	}
}

// serve runs one call.
func (s *Server) serve(ctx context.Context, req request) (uint64, error) {
	if req.RequestID != "" {
		ctx = registry.WithRequestID(ctx, req.RequestID)
	}
	switch req.Op {
	case opWrite:
		s.log.DebugContext(ctx, "peer call: a forwarded write", "from", req.From, "bytes", len(req.Command))
		return s.handle.ServeForwarded(ctx, registry.Forwarded{Command: req.Command, Secret: req.Secret, RequestID: req.RequestID, From: req.From})
	case opReadIndex:
		s.log.DebugContext(ctx, "peer call: a read index", "from", req.From, "consistency", req.Consistency)
		return s.handle.ServeReadIndex(ctx, registry.Consistency(req.Consistency))
	default:
		return 0, fmt.Errorf("%w: unknown peer call %q", model.ErrInvalid, req.Op)
	}
}

// Close closes every connection and waits for their calls to end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
