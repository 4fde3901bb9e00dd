//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/raftnode"
)

// Network decides which directed node-to-node links carry traffic. Every node's Raft
// and HTTP advertise addresses are proxies owned by the harness; each proxy learns
// which node a connection (Raft) or request (HTTP forwarding) comes from and consults
// the Network. The zero value is not usable; use NewNetwork.
type Network struct {
	mu      sync.Mutex
	blocked map[link]bool
	conns   map[*linkConn]struct{}
	// delivered holds the workload operation ids (HeaderOpID) of the forwarded
	// requests the HTTP proxies passed on to a node.
	delivered map[string]bool
	// healed is closed and replaced whenever links are unblocked.
	healed chan struct{}
}

type link struct{ from, to string }

// linkConn is one proxied Raft connection from one node to another.
type linkConn struct {
	link
	a, b net.Conn
}

func (c *linkConn) close() {
	_ = c.a.Close()
	_ = c.b.Close()
}

// NewNetwork returns a network on which every link is up.
func NewNetwork() *Network {
	return &Network{blocked: map[link]bool{}, conns: map[*linkConn]struct{}{}, delivered: map[string]bool{}, healed: make(chan struct{})}
}

// Allowed reports whether traffic from one node to another is delivered.
func (n *Network) Allowed(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.blocked[link{from, to}]
}

// Partition cuts every link between nodes of different groups, in both directions,
// and closes the Raft connections that used them. Nodes missing from every group keep
// all their links. Links inside a group stay as they are.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.blocked[link{a, b}] = true
				}
			}
		}
	}
	for c := range n.conns {
		if n.blocked[c.link] {
			c.close()
			delete(n.conns, c)
		}
	}
}

// Heal brings every link up again.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked = map[link]bool{}
	close(n.healed)
	n.healed = make(chan struct{})
}

// Describe lists the blocked links, for logs.
func (n *Network) Describe() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for l := range n.blocked {
		out = append(out, l.from+"->"+l.to)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "all links up"
	}
	return "blocked " + strings.Join(out, " ")
}

// Delivered reports whether an HTTP proxy passed a request of the workload operation
// id on to a node.
func (n *Network) Delivered(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.delivered[id]
}

func (n *Network) markDelivered(id string) {
	if id == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delivered[id] = true
}

// register records a proxied connection unless its link is blocked (then false): the
// check and the registration are atomic with Partition's cut.
func (n *Network) register(c *linkConn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blocked[c.link] {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Network) unregister(c *linkConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.conns, c)
}

// closeAll closes every proxied connection.
func (n *Network) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		c.close()
		delete(n.conns, c)
	}
}

// recordingReader keeps a copy of every byte read through it.
type recordingReader struct {
	r   io.Reader
	buf bytes.Buffer
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	rr.buf.Write(p[:n])
	return n, err
}

// Raft RPC type bytes of hashicorp/raft's NetworkTransport (net_transport.go).
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

// raftSender decodes the first RPC of a NetworkTransport connection — a type byte,
// then the msgpack-encoded request — and returns the id in its RPC header. Every
// connection carries the RPCs of one sender only (the transport pools connections per
// target), so the first request names the sender of the whole connection.
func raftSender(r *bufio.Reader) (string, error) {
	t, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	var req raft.WithRPCHeader
	switch t {
	case raftnode.PeerTag:
		// The servers' peer RPC: the tag, then the sender's id (raftnode.DialPeer).
		n, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		id := make([]byte, n)
		if _, err := io.ReadFull(r, id); err != nil {
			return "", err
		}
		if n == 0 {
			return "", errors.New("peer rpc without a sender id")
		}
		return string(id), nil
	case rpcAppendEntries:
		req = &raft.AppendEntriesRequest{}
	case rpcRequestVote:
		req = &raft.RequestVoteRequest{}
	case rpcInstallSnapshot:
		req = &raft.InstallSnapshotRequest{}
	case rpcTimeoutNow:
		req = &raft.TimeoutNowRequest{}
	case rpcRequestPreVote:
		req = &raft.RequestPreVoteRequest{}
	default:
		return "", fmt.Errorf("unknown raft rpc type %d", t)
	}
	if err := codec.NewDecoder(r, &codec.MsgpackHandle{}).Decode(req); err != nil {
		return "", fmt.Errorf("decode raft rpc %d: %w", t, err)
	}
	id := string(req.GetRPCHeader().ID)
	if id == "" {
		return "", fmt.Errorf("raft rpc %d without a sender id", t)
	}
	return id, nil
}

// raftProxy forwards the Raft traffic addressed to one node, dropping connections
// whose link is blocked.
type raftProxy struct {
	to       string
	ln       net.Listener
	net      *Network
	upstream func() string
	wg       sync.WaitGroup
}

func newRaftProxy(to string, nw *Network, upstream func() string) (*raftProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &raftProxy{to: to, ln: ln, net: nw, upstream: upstream}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address peers dial to reach the node.
func (p *raftProxy) Addr() string { return p.ln.Addr().String() }

func (p *raftProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *raftProxy) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rr := &recordingReader{r: c}
	from, err := raftSender(bufio.NewReader(rr))
	if err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target := p.upstream()
	if target == "" || !p.net.Allowed(from, p.to) {
		refuse(c)
		return
	}
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		refuse(c)
		return
	}
	lc := &linkConn{link: link{from, p.to}, a: c, b: up}
	if !p.net.register(lc) {
		lc.close()
		return
	}
	defer p.net.unregister(lc)
	defer lc.close()
	if _, err := up.Write(rr.buf.Bytes()); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// refuse ends a connection the proxy cannot carry with a reset, as a host answers a
// connection to a port nobody listens on (ECONNREFUSED), rather than with an orderly
// close: a connection closed cleanly before any answer is what a server of a release
// without the peer RPC does, and a caller must not take a node that is down or cut
// off for one.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// links counts the proxied connections to the node to that are still open.
func (n *Network) links(to string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for c := range n.conns {
		if c.to == to {
			k++
		}
	}
	return k
}

func (p *raftProxy) close() {
	_ = p.ln.Close()
	p.wg.Wait()
}

// httpProxy stands in front of one node's HTTP API for the other nodes: the node
// advertises its address, so forwarded requests and join announcements pass through
// it. A request whose sender's link is blocked is held, unanswered, until its sender
// gives up — what a partition does to an HTTP request — and then its connection is
// dropped.
type httpProxy struct {
	to       string
	ln       net.Listener
	srv      *http.Server
	net      *Network
	upstream func() string
	rp       *httputil.ReverseProxy
	// stop ends held requests when the proxy closes.
	stop chan struct{}
}

// maxHold bounds how long a blocked request is held.
const maxHold = 30 * time.Second

func newHTTPProxy(to string, nw *Network, upstream func() string) (*httpProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &httpProxy{to: to, ln: ln, net: nw, upstream: upstream, stop: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = pr.In.Context().Value(upstreamKey{}).(string)
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     10 * time.Second,
		},
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {
			// The node is down: drop the connection as a dead host would.
			panic(http.ErrAbortHandler)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog()}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

type upstreamKey struct{}

// Addr is the address the node advertises as its HTTP address.
func (p *httpProxy) Addr() string { return p.ln.Addr().String() }

func (p *httpProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from := httpSender(r)
	if from != "" && !p.net.Allowed(from, p.to) {
		t := time.NewTimer(maxHold)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		case <-p.stop:
		}
		panic(http.ErrAbortHandler)
	}
	target := p.upstream()
	if target == "" {
		panic(http.ErrAbortHandler)
	}
	p.net.markDelivered(r.Header.Get(HeaderOpID))
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, target)))
}

// httpSender names the node a request comes from: the forwarding header, or the id in
// a join announcement. "" when unknown (such requests pass).
func httpSender(r *http.Request) string {
	if by := r.Header.Get(api.HeaderForwardedBy); by != "" {
		return by
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/cluster/join" && r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return ""
		}
		var req api.JoinRequest
		if json.Unmarshal(body, &req) == nil {
			return req.ID
		}
	}
	return ""
}

func (p *httpProxy) close() {
	close(p.stop)
	_ = p.srv.Close()
	if t, ok := p.rp.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}

// errNotRunning is returned for operations on a node that is not running.
var errNotRunning = errors.New("node is not running")
