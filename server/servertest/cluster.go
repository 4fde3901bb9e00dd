// Package servertest runs in-process Roster clusters on loopback for tests: every node
// is a full server (store, FSM, Raft, HTTP API) on ports picked at start.
package servertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
)

// Node is one member of a test cluster. Set ROSTER_TEST_LOG=1 to see its logs.
type Node struct {
	ID       string
	DataDir  string
	RaftAddr string
	HTTPAddr string         // bound on port 0 at first start, then kept across restarts
	GRPCAddr string         // the Nacos gRPC address with WithGRPC (likewise kept), else ""
	Server   *server.Server // nil while stopped
	cfg      server.Config
	raftLn   net.Listener // bound before the first start, so that no other process takes the port
	tls      *tls.Config  // the client TLS of the cluster's TLS (WithTLS), else nil
}

// Running reports whether the node is started.
func (n *Node) Running() bool { return n.Server != nil }

// Client returns an API client for this node (over HTTPS with the cluster's client
// TLS configuration under WithTLS).
func (n *Node) Client() *client.Client { return client.New(n.HTTPAddr, client.WithTLSConfig(n.tls)) }

// URL is the base URL of this node's API: https://HTTPAddr under WithTLS, else
// http://HTTPAddr.
func (n *Node) URL() string {
	if n.tls != nil {
		return "https://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr
}

// Cluster is a set of nodes bootstrapped together.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
	// TLS is the cluster's CA and certificates under WithTLS, else nil.
	TLS *TLS
}

// Option adjusts every node's configuration before it starts.
type Option func(*server.Config)

// FastTimeouts shortens Raft's timers so elections in tests take well under a second.
func FastTimeouts() Option {
	return func(c *server.Config) {
		c.Raft.HeartbeatTimeout = 300 * time.Millisecond
		c.Raft.ElectionTimeout = 300 * time.Millisecond
		c.Raft.LeaderLeaseTimeout = 150 * time.Millisecond
		c.Raft.PromoteAfter = time.Second
	}
}

// WithGRPC serves the Nacos gRPC API on every node, on a loopback port picked at the
// first start and kept across restarts (Node.GRPCAddr).
func WithGRPC() Option {
	return func(c *server.Config) { c.GRPCAddr = "127.0.0.1:0" }
}

// WithACL starts every node with ACLs enabled (--acl-enabled); the test bootstraps them.
func WithACL() Option {
	return func(c *server.Config) { c.ACLEnabled = true }
}

// LoopbackPolicy is the probe policy of every test node unless an Option sets another:
// probes may only connect to 127.0.0.0/8 and ::1.
func LoopbackPolicy() healthcheck.Policy {
	p, err := healthcheck.ParsePolicy(healthcheck.LoopbackOnly, "")
	if err != nil {
		panic(err)
	}
	return p
}

// GuardDial wraps a probe dialer so that a probe of anything but a loopback IP address
// or the name "localhost" fails the test (t.Errorf names the address) and is never
// dialed. Every node of a Cluster probes through it unless an Option sets its own
// Config.Health.Dial.
func GuardDial(t testing.TB, next healthcheck.DialFunc) healthcheck.DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		if ip, perr := netip.ParseAddr(host); (perr == nil && ip.Unmap().IsLoopback()) || host == "localhost" {
			return next(ctx, network, address)
		}
		t.Errorf("servertest: a health probe tried to dial %s, which is not on loopback; register 127.x.y.z instances or use a NONE cluster", address)
		return nil, fmt.Errorf("servertest: probe of non-loopback address %s refused", address)
	}
}

// FreePort returns a loopback address with a port that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// New starts an n-node cluster from a static peer list and registers cleanup.
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var peers []raftnode.Peer
	for i := 1; i <= n; i++ {
		id := "n" + strconv.Itoa(i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("raft listener: %v", err)
		}
		nd := &Node{ID: id, DataDir: filepath.Join(t.TempDir(), id), RaftAddr: ln.Addr().String(), raftLn: ln}
		c.Nodes = append(c.Nodes, nd)
		peers = append(peers, raftnode.Peer{ID: id, Addr: nd.RaftAddr})
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("ROSTER_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, nd := range c.Nodes {
		nd.cfg = server.Config{
			NodeID:   nd.ID,
			DataDir:  nd.DataDir,
			HTTPAddr: "127.0.0.1:0",
			RaftAddr: nd.RaftAddr,
			Peers:    peers,
			Logger:   logger,
		}
		for _, o := range opts {
			o(&nd.cfg)
		}
		if nd.cfg.TLS.CAFile == tlsPending {
			if c.TLS == nil {
				c.TLS = NewTLS(t)
			}
			verify := nd.cfg.TLS.VerifyIncoming
			nd.cfg.TLS = c.TLS.NodeConfig(nd.ID)
			nd.cfg.TLS.VerifyIncoming = verify
			nd.tls = c.TLS.Client
		}
		if nd.cfg.Health.Policy.IsZero() {
			nd.cfg.Health.Policy = LoopbackPolicy()
		}
		if nd.cfg.Health.Dial == nil {
			nd.cfg.Health.Dial = GuardDial(t, nd.cfg.Health.Policy.Dialer())
		}
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	t.Cleanup(c.Close)
	return c
}

// Start starts (or restarts, on the same data dir and addresses) node i.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if nd.Server != nil {
		c.t.Fatalf("node %s already running", nd.ID)
	}
	if nd.HTTPAddr != "" {
		// A restart keeps its HTTP address so that clients made earlier still work.
		nd.cfg.HTTPAddr = nd.HTTPAddr
	}
	if nd.GRPCAddr != "" {
		nd.cfg.GRPCAddr = nd.GRPCAddr
	}
	nd.cfg.RaftListener, nd.raftLn = nd.raftLn, nil
	// A just-closed listener's port can take a moment to be released.
	var err error
	defer func() {
		if nd.Server == nil && err != nil {
			c.t.Logf("start %s: %v", nd.ID, err)
		}
	}()
	wait.For(c.t, 5*time.Second, "node "+nd.ID+" to start", func() bool {
		nd.Server, err = server.New(nd.cfg)
		nd.cfg.RaftListener = nil
		return err == nil
	})
	nd.HTTPAddr = nd.Server.HTTPAddr()
	nd.GRPCAddr = nd.Server.GRPCAddr()
	if err := nd.Server.Start(); err != nil {
		c.t.Fatalf("start %s: %v", nd.ID, err)
	}
}

// Configure changes node i's configuration for its next Start (the node must be stopped).
func (c *Cluster) Configure(i int, fn func(*server.Config)) {
	c.t.Helper()
	if c.Nodes[i].Server != nil {
		c.t.Fatalf("configure %s: the node is running", c.Nodes[i].ID)
	}
	fn(&c.Nodes[i].cfg)
}

// Stop stops node i; its data stays for a later Start.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if nd.Server == nil {
		return
	}
	if err := nd.Server.Close(); err != nil {
		c.t.Logf("stop %s: %v", nd.ID, err)
	}
	nd.Server = nil
}

// Close stops every node.
func (c *Cluster) Close() {
	for i, nd := range c.Nodes {
		c.Stop(i)
		if nd.raftLn != nil {
			_ = nd.raftLn.Close()
			nd.raftLn = nil
		}
	}
}

// Leader returns the index of the running node that is leader, or -1.
func (c *Cluster) Leader() int {
	for i, nd := range c.Nodes {
		if nd.Server != nil && nd.Server.Node().IsLeader() {
			return i
		}
	}
	return -1
}

// Followers returns the indexes of running nodes that are not leader.
func (c *Cluster) Followers() []int {
	var out []int
	for i, nd := range c.Nodes {
		if nd.Server != nil && !nd.Server.Node().IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// WaitForLeader waits until exactly one running node is leader, every running node knows
// it, and every running node reports ready; it returns the leader's index.
func (c *Cluster) WaitForLeader(ctx context.Context) (int, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if i := c.Leader(); i >= 0 {
			lid := c.Nodes[i].ID
			ok := true
			for _, nd := range c.Nodes {
				if nd.Server == nil {
					continue
				}
				m, known := nd.Server.Node().Leader()
				ready, _ := nd.Server.Node().Ready()
				if !known || m.ID != lid || m.HTTPAddr == "" || !ready {
					ok = false
					break
				}
			}
			if ok {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader known to every running node: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// MustLeader is WaitForLeader with a 15 s deadline that fails the test.
func (c *Cluster) MustLeader() int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	i, err := c.WaitForLeader(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return i
}

// WaitApplied waits until every running node has applied index idx.
func (c *Cluster) WaitApplied(ctx context.Context, idx uint64) error {
	for _, nd := range c.Nodes {
		if nd.Server == nil {
			continue
		}
		if err := nd.Server.Node().FSM().WaitApplied(ctx, idx); err != nil {
			return fmt.Errorf("%s: %w", nd.ID, err)
		}
	}
	return nil
}

// WaitSettled waits until the leader has written what it writes by itself after an
// election (the cluster's identity, every server's member record with its addresses and
// newest command type) and every running node is ready and holds the whole log: a test
// that asserts the log did not move starts from there.
func (c *Cluster) WaitSettled() {
	c.t.Helper()
	wait.Until(c.t, 20*time.Second, "the cluster to settle", func() (bool, string) {
		var last uint64
		for _, nd := range c.Nodes {
			if !nd.Running() {
				continue
			}
			r := nd.Server.Node().Raft()
			if last == 0 {
				last = r.LastIndex()
			}
			ready, _ := nd.Server.Node().Ready()
			switch {
			case !ready:
				return false, nd.ID + " is not ready"
			case r.LastIndex() != last || r.CommitIndex() != last:
				return false, fmt.Sprintf("%s holds the log to %d, committed %d, another node to %d", nd.ID, r.LastIndex(), r.CommitIndex(), last)
			case nd.Server.Node().ClusterID() == "":
				return false, nd.ID + " has no cluster identity yet"
			}
			for _, other := range c.Nodes {
				if !other.Running() {
					continue
				}
				m, found := nd.Server.Store().Member(other.ID)
				// Each server's record carries its newest command type once its
				// announcement to the current leader has committed (with TLS the
				// record's address is https://host:port).
				if !found || !strings.HasSuffix(m.HTTPAddr, other.HTTPAddr) || m.NewestCommand == 0 {
					return false, fmt.Sprintf("%s records %s as %+v (found %v)", nd.ID, other.ID, m, found)
				}
			}
		}
		return true, ""
	})
}
