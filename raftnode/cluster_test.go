package raftnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// countingFSM wraps the real FSM and counts what Raft hands it.
type countingFSM struct {
	*fsm.FSM
	restores atomic.Int64 // Restore calls
	replayed atomic.Int64 // entries at or below the applied index when handed over
	// restoreGate, when set, holds every Restore until it is closed (a slow
	// installation); inRestore counts the Restore calls under way.
	restoreGate atomic.Pointer[chan struct{}]
	inRestore   atomic.Int64
}

func (c *countingFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	applied := c.AppliedIndex()
	for _, l := range logs {
		if l.Index <= applied {
			c.replayed.Add(1)
		}
	}
	return c.FSM.ApplyBatch(logs)
}

func (c *countingFSM) Restore(rc io.ReadCloser) error {
	c.restores.Add(1)
	c.inRestore.Add(1)
	defer c.inRestore.Add(-1)
	if g := c.restoreGate.Load(); g != nil {
		<-*g
	}
	return c.FSM.Restore(rc)
}

// testNode is one server of a testCluster. Its HTTP listener (serving only the join
// route) and its addresses survive restarts.
type testNode struct {
	id       string
	dir      string
	raftAddr string
	httpAddr string
	httpSrv  *http.Server
	raftLn   net.Listener // held until the node's first start
	node     atomic.Pointer[Node]
	st       *store.Store
	sm       *countingFSM
	running  bool
	// newest, when set, makes the node play a build whose newest command type it is.
	newest fsm.MessageType
}

// N returns the running Node.
func (tn *testNode) N() *Node { return tn.node.Load() }

// testCluster is a set of nodes on loopback with their logs captured per test.
type testCluster struct {
	t      testing.TB
	nodes  []*testNode
	peers  []Peer
	logs   *syncBuffer
	logger *slog.Logger
	mod    func(*Config) // optional config tweak applied to every node
	// joinHTTP carries the nodes' join requests (closed with the cluster).
	joinHTTP *http.Client
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddrs returns n distinct loopback addresses nothing listens on.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve port: %v", err)
		}
		addrs = append(addrs, ln.Addr().String())
		defer ln.Close()
	}
	return addrs
}

// newTestCluster prepares size nodes (not started). With static, their Peers list
// holds all of them.
func newTestCluster(t testing.TB, size int, static bool) *testCluster {
	t.Helper()
	logs := &syncBuffer{}
	c := &testCluster{
		t:        t,
		logs:     logs,
		logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		joinHTTP: &http.Client{Transport: &http.Transport{Proxy: nil}},
	}
	// Every port is held by a listener from the start: the first start of a node
	// hands its Raft listener to the node (Config.RaftListener).
	for i := range size {
		tn := &testNode{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir()}
		c.startHTTP(tn)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen raft: %v", err)
		}
		tn.raftLn, tn.raftAddr = ln, ln.Addr().String()
		c.nodes = append(c.nodes, tn)
		if static {
			c.peers = append(c.peers, Peer{ID: tn.id, Addr: tn.raftAddr})
		}
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			c.stop(tn)
			_ = tn.httpSrv.Close()
			if tn.raftLn != nil {
				_ = tn.raftLn.Close()
			}
		}
		c.joinHTTP.CloseIdleConnections()
		if t.Failed() {
			t.Logf("cluster logs:\n%s", logs.String())
		}
	})
	return c
}

// mustNewCluster starts a cluster of size nodes bootstrapped from static peers.
func mustNewCluster(t testing.TB, size int) *testCluster {
	t.Helper()
	c := newTestCluster(t, size, true)
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	return c
}

// joiner sends a node's join requests with the API client, as the server does.
func (c *testCluster) joiner(ctx context.Context, target string, req JoinRequest) error {
	_, err := client.New(target, client.WithHTTPClient(c.joinHTTP)).Join(ctx, api.JoinRequest{
		ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
		ClusterID: req.ClusterID, Announce: req.Announce, NewestCommand: req.NewestCommand,
		Version: req.Version, Commit: req.Commit,
	})
	return err
}

// startHTTP serves the join route for tn: the running node handles it on the leader
// and answers 503 elsewhere.
func (c *testCluster) startHTTP(tn *testNode) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatalf("listen http: %v", err)
	}
	tn.httpAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/cluster/join", func(w http.ResponseWriter, r *http.Request) {
		var req api.JoinRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := tn.N()
		if n == nil {
			http.Error(w, "node down", http.StatusServiceUnavailable)
			return
		}
		err := n.Join(r.Context(), JoinRequest{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
			ClusterID: req.ClusterID, Announce: req.Announce, NewestCommand: req.NewestCommand, Version: req.Version, Commit: req.Commit})
		switch {
		case err == nil:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"index":0}` + "\n"))
		case errors.Is(err, ErrNotLeader):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		case errors.Is(err, model.ErrInvalid):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case errors.Is(err, model.ErrConflict), errors.Is(err, ErrClusterMismatch):
			http.Error(w, err.Error(), http.StatusConflict)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	tn.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = tn.httpSrv.Serve(ln) }()
}

// raftListener returns the listener held since the cluster was created or, on a
// restart, binds the node's address again (retrying while the port is briefly taken).
func (c *testCluster) raftListener(tn *testNode) net.Listener {
	c.t.Helper()
	if ln := tn.raftLn; ln != nil {
		tn.raftLn = nil
		return ln
	}
	var ln net.Listener
	var err error
	wait.For(c.t, 10*time.Second, "the Raft port "+tn.raftAddr+" to be free", func() bool {
		ln, err = net.Listen("tcp", tn.raftAddr)
		return err == nil
	})
	return ln
}

// config is tn's node configuration.
func (c *testCluster) config(tn *testNode, join string) Config {
	cfg := Config{
		NodeID:        tn.id,
		DataDir:       tn.dir,
		RaftListener:  c.raftListener(tn),
		HTTPAdvertise: tn.httpAddr,
		Peers:         c.peers,
		Join:          join,
		Joiner:        c.joiner,
		Logger:        c.logger,
		// A joined node becomes a voter after half a second of health, not ten.
		PromoteAfter: 500 * time.Millisecond,
	}
	if join != "" {
		cfg.Peers = nil
	}
	if tn.newest != 0 {
		// A release of the first generation reports no version.
		cfg.Build = buildinfo.Info{GoVersion: runtime.Version()}
	}
	if c.mod != nil {
		c.mod(&cfg)
	}
	return cfg
}

// start opens tn's store and FSM and starts its node.
func (c *testCluster) start(tn *testNode, join string) {
	c.t.Helper()
	st, err := store.Open(filepath.Join(tn.dir, "state.db"), store.Options{NoSync: true, Logger: c.logger})
	if err != nil {
		c.t.Fatalf("%s: open store: %v", tn.id, err)
	}
	f := fsm.New(st, c.logger)
	if tn.newest != 0 {
		f = fsm.NewOlder(st, c.logger, tn.newest)
	}
	sm := &countingFSM{FSM: f}
	n, err := newNode(c.config(tn, join), sm)
	if err != nil {
		_ = st.Close()
		c.t.Fatalf("%s: start node: %v", tn.id, err)
	}
	tn.st, tn.sm, tn.running = st, sm, true
	tn.node.Store(n)
}

// stop shuts tn's node down and closes its store.
func (c *testCluster) stop(tn *testNode) {
	c.t.Helper()
	if !tn.running {
		return
	}
	n := tn.N()
	tn.node.Store(nil)
	tn.running = false
	if err := n.Shutdown(); err != nil {
		c.t.Errorf("%s: shutdown: %v", tn.id, err)
	}
	if err := tn.st.Close(); err != nil {
		c.t.Errorf("%s: close store: %v", tn.id, err)
	}
}

// running lists the started nodes.
func (c *testCluster) running() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.running {
			out = append(out, tn)
		}
	}
	return out
}

// waitForLeader waits until exactly one running node is a ready leader and every
// running node agrees on it.
func (c *testCluster) waitForLeader(timeout time.Duration) *testNode {
	c.t.Helper()
	var leader *testNode
	wait.For(c.t, timeout, "a single ready leader", func() bool {
		leader = nil
		for _, tn := range c.running() {
			if tn.N().leaderReady() {
				if leader != nil {
					return false
				}
				leader = tn
			}
		}
		if leader == nil {
			return false
		}
		for _, tn := range c.running() {
			if _, id := tn.N().Raft().LeaderWithID(); string(id) != leader.id {
				return false
			}
		}
		return true
	})
	return leader
}

// followers lists the running nodes other than leader.
func (c *testCluster) followers(leader *testNode) []*testNode {
	var out []*testNode
	for _, tn := range c.running() {
		if tn != leader {
			out = append(out, tn)
		}
	}
	return out
}

// ctxTimeout is a context with a deadline, cancelled at the end of the test.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustApplyNamespace commits an UpsertNamespace on n and returns its index.
func mustApplyNamespace(t testing.TB, n *Node, id string) uint64 {
	t.Helper()
	idx, err := n.Apply(ctxTimeout(t, 10*time.Second), fsm.UpsertNamespaceRequest{
		Namespace: model.Namespace{ID: id, Name: id},
	})
	if err != nil {
		t.Fatalf("apply namespace %s on %s: %v", id, n.ID(), err)
	}
	return idx
}

// hasNamespace reports whether tn's store holds namespace id.
func hasNamespace(tn *testNode, id string) bool {
	_, _, err := tn.st.Namespace(nil, id)
	return err == nil
}
