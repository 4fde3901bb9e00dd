// Package raftnode wires Roster's state machine into hashicorp/raft: transport, log and
// snapshot storage, bootstrap and join, leader-only writes, read consistency, the
// member table's addresses, and leadership callbacks.
package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// StateMachine is what a Node needs from the replicated state machine; *fsm.FSM
// implements it. ApplyBatch must answer every command entry with a *fsm.Result.
type StateMachine interface {
	raft.BatchingFSM
	// AppliedIndex is the index of the last entry whose effects are in the state.
	AppliedIndex() uint64
	// WaitApplied returns once AppliedIndex() ≥ idx, or with ctx's error.
	WaitApplied(ctx context.Context, idx uint64) error
	// Store is the state the machine applies entries to: the Node reads the member
	// table and takes state snapshots from it.
	Store() *store.Store
	// NewestType is the newest command type the machine applies; the node announces it.
	NewestType() fsm.MessageType
}

// Node is one Roster server's Raft participant. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	log *slog.Logger
	// sm is the state machine Raft applies entries to; its store holds the member table.
	sm StateMachine

	raft     *raft.Raft
	trans    *raft.NetworkTransport
	mux      *muxStreamLayer // the Raft listener, shared with the peer RPC (peer.go)
	notify   *commitNotifier // sends followers the commit index as soon as it advances
	commit   leaderCommit    // the highest commit index a leader sent this node
	append   *appendWatch    // the log store Raft writes, and whether that fails
	bolt     *raftboltdb.BoltStore
	logs     raft.LogStore // the cache in front of bolt
	logCheck *logVerifier  // what Raft writes through: the cache, checked at checkpoints
	met      *metrics      // exported by RegisterMetrics (metrics.go)

	notifyCh chan bool
	ctx      context.Context // cancelled by Shutdown
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	promo    promoter    // the non-voters waiting for a vote (leader)
	pilot    autopilot   // the leader's view of the servers' health (autopilot.go)
	gate     writeGate   // closed by Handover: no new writes while the node stops
	commands commandGate // which command types every server applies (commands.go)
	verify   verifier    // batches the leadership confirmations of linearizable reads (readindex.go)
	// catchUp is the leader's commit index when this node first heard it after starting,
	// and startCaughtUp whether the state has since reached it (Ready).
	catchUp       atomic.Uint64
	startCaughtUp atomic.Bool
	idMismatch    atomic.Bool // the data directory's cluster id was found to differ (logged once)
	// announced is the leadership this follower last announced itself to (join.go).
	announced atomic.Pointer[announcedTo]

	mu        sync.Mutex
	closed    bool
	callbacks []func(context.Context)
	lead      leadership
	changed   chan struct{} // closed and replaced whenever lead changes

	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the Raft storage under cfg.DataDir, starts the transport and Raft with f
// as the state machine, bootstraps from cfg.Peers when no state exists, and starts
// the background work (leadership observer, and with a Joiner, member-address
// registration and join).
// cfg is validated first. The caller owns f and its store: Shutdown does not close them.
func New(cfg Config, f *fsm.FSM) (*Node, error) {
	if f == nil {
		if cfg.RaftListener != nil {
			_ = cfg.RaftListener.Close()
		}
		return nil, errors.New("raftnode: nil FSM")
	}
	return newNode(cfg, f)
}

func newNode(cfg Config, sm StateMachine) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		if cfg.RaftListener != nil {
			_ = cfg.RaftListener.Close()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger,
		sm:       sm,
		notifyCh: make(chan bool, 16),
		ctx:      ctx,
		cancel:   cancel,
		changed:  make(chan struct{}),
		met:      newMetrics(),
	}
	existing, err := n.open()
	if err != nil {
		cancel()
		n.closeStorage()
		return nil, err
	}
	n.callbacks = append(n.callbacks, n.ensureClusterID, n.runAutopilot, n.syncMembers, n.proposeLogCheckpoints)
	n.wg.Add(2)
	go n.observe()
	go n.runIdentity()
	if cfg.Joiner != nil {
		n.wg.Add(1)
		go n.runRegistrar()
	}
	// A node joins when it has no state, and finishes joining after a restart while it
	// still waits for the vote it asked for.
	if cfg.Join != "" && (!existing || (!cfg.NonVoter && !n.isVoter())) {
		n.wg.Add(1)
		go n.joinAtStart(cfg.Join)
	}
	return n, nil
}

// open creates the directories, transport, snapshot store, log store and Raft, and
// bootstraps a fresh node from the static peers. It reports whether Raft state existed.
func (n *Node) open() (bool, error) {
	cfg := &n.cfg
	ln := cfg.RaftListener
	cfg.RaftListener = nil // owned by the transport from here on
	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, datadir.DirMode); err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return false, fmt.Errorf("raftnode: create %s: %w", raftDir, err)
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftBind); err != nil {
			return false, fmt.Errorf("raftnode: listen on %s: %w", cfg.RaftBind, err)
		}
	}
	stream := &tcpStreamLayer{ln: ln, tls: cfg.TLS, refused: newHandshakeFailures(n.met.tlsRefused, n.log)}
	if cfg.RaftAdvertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil || a.IP == nil || a.IP.IsUnspecified() {
			_ = ln.Close()
			return false, configErr("RaftAdvertise", "%q does not resolve to a specific IP address (%v)", cfg.RaftAdvertise, err)
		}
		stream.advertise = a
	}
	n.mux = newMuxStreamLayer(stream)
	n.trans = raft.NewNetworkTransportWithLogger(n.mux, transportPool, transportTimeout, newHCLogger(n.log, "raft-net"))
	if cfg.RaftAdvertise == "" {
		cfg.RaftAdvertise = string(n.trans.LocalAddr())
	}

	st, err := openStorage(cfg.DataDir, cfg.SnapshotRetain, startLockTimeout, n.log)
	if err != nil {
		return false, err
	}
	// The watch sits between the cache and bolt, where it sees bolt's own errors (the
	// cache flattens them into text).
	n.append = &appendWatch{LogStore: st.bolt}
	watched, err := raft.NewLogCache(logCacheSize, n.append)
	if err != nil {
		_ = st.bolt.Close()
		return false, fmt.Errorf("raftnode: log cache: %w", err)
	}
	n.bolt, n.logs = st.bolt, watched
	// Raft writes through the verifier, which checks the log at every checkpoint against
	// what the watch (under the cache) reads back (logverify.go).
	n.logCheck = newLogVerifier(watched, n.append, n.met.logVerify, n.log.With("component", "log-verify"), n.logMismatch)
	bolt, cache, snaps := st.bolt, raft.LogStore(n.logCheck), st.snaps

	existing, err := raft.HasExistingState(cache, bolt, snaps)
	if err != nil {
		return false, fmt.Errorf("raftnode: read raft state: %w", err)
	}
	if existing {
		if err := n.catchUpFromSnapshot(st.snaps.FileSnapshotStore, filepath.Join(cfg.DataDir, raftDirName)); err != nil {
			return false, err
		}
	}
	rc := cfg.raftConfig(n.notifyCh)
	rc.Logger = newHCLogger(n.log, "raft")
	if !existing && len(cfg.Peers) > 0 {
		var conf raft.Configuration
		for _, p := range cfg.Peers {
			conf.Servers = append(conf.Servers, raft.Server{
				Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
			})
		}
		if err := raft.BootstrapCluster(rc, cache, bolt, snaps, n.trans, conf); err != nil {
			return false, fmt.Errorf("raftnode: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped raft cluster", "peers", len(cfg.Peers))
	}
	n.notify = newCommitNotifier(noHeartbeatFastPath{n.trans}, cfg.HeartbeatTimeout, !cfg.noCommitNotify)
	n.commit.self = raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(cfg.NodeID), Addr: []byte(n.trans.LocalAddr())}
	trans := notifyingTransport{noHeartbeatFastPath{n.trans}, n.notify, &n.commit}
	r, err := raft.NewRaft(rc, commitHookFSM{n.sm, n.notify.notifyCommit, n.met}, cache, bolt, snaps, trans)
	if err != nil {
		return false, fmt.Errorf("raftnode: start raft: %w", err)
	}
	r.RegisterObserver(n.met.leaderObserver())
	n.notify.setRaft(r)
	n.raft = r
	n.log.Info("raft started", "raft_addr", cfg.RaftAdvertise, "http_addr", cfg.HTTPAdvertise, "existing_state", existing)
	return existing, nil
}

// closeStorage closes what open created, for a failed New (Raft closes the transport
// itself on Shutdown).
func (n *Node) closeStorage() {
	if n.raft == nil && n.trans != nil {
		if n.notify != nil {
			n.notify.close()
		}
		_ = n.trans.Close()
	}
	if n.logCheck != nil {
		n.logCheck.close()
	}
	if n.bolt != nil {
		_ = n.bolt.Close()
	}
}

// Shutdown stops the background work, cancels every leadership callback's context and
// waits for the callbacks to return, shuts Raft down and closes the log store.
// It is idempotent and returns the same result on every call.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		n.cancel()
		n.log.Info("shutting down raft")
		if s, ok := n.sm.(interface{ Stop() }); ok {
			s.Stop() // a state machine stalled on a failing disk gives up its retries
		}
		errs := []error{n.raft.Shutdown().Error()}
		// Raft closes the listener; pooled outbound connections stay open until closed
		// here, and the peers' handlers for them only end when they are.
		n.trans.CloseStreams()
		n.wg.Wait()
		n.logCheck.close()
		errs = append(errs, n.bolt.Close())
		n.shutdownErr = errors.Join(errs...)
	})
	return n.shutdownErr
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// ID is this node's server id.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr is the Raft address peers dial to reach this node.
func (n *Node) RaftAddr() string { return n.cfg.RaftAdvertise }

// HTTPAddr is this node's HTTP address as recorded in the member table.
func (n *Node) HTTPAddr() string { return n.cfg.HTTPAdvertise }

// IsLeader reports whether this node is the Raft leader right now. A leader may not
// yet be ready to serve reads (see LeaderRead).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// KnownLeader reports whether this node knows a current leader (itself included).
func (n *Node) KnownLeader() bool {
	_, id := n.raft.LeaderWithID()
	return id != ""
}

// LastContact is 0 on the leader, the time since this node last heard from the
// leader otherwise, and -1 if it never has.
func (n *Node) LastContact() time.Duration {
	if n.IsLeader() {
		return 0
	}
	last := n.raft.LastContact()
	if last.IsZero() {
		return -1
	}
	return time.Since(last)
}

// Leader returns the current leader's id and Raft address, and its HTTP address from
// the member table (empty until the leader's record has been applied here). ok is
// false when no leader is known.
func (n *Node) Leader() (m model.Member, ok bool) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return model.Member{}, false
	}
	if string(id) == n.cfg.NodeID {
		return n.self(), true
	}
	m = model.Member{ID: string(id), RaftAddr: string(addr)}
	if rec, found := n.member(string(id)); found {
		m.HTTPAddr = rec.HTTPAddr
	}
	return m, true
}

// member reads server id's record from the replicated member table.
func (n *Node) member(id string) (model.Member, bool) { return n.sm.Store().Member(id) }

// self is this node's member record.
func (n *Node) self() model.Member {
	return model.Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAdvertise, HTTPAddr: n.cfg.HTTPAdvertise,
		NewestCommand: uint8(n.sm.NewestType())}
}

// Raft exposes the underlying Raft instance (snapshots, restore, stats).
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSM is the state machine passed to New.
func (n *Node) FSM() StateMachine { return n.sm }

// tcpStreamLayer is raft's TCP stream layer over a listener this package opened (or
// was given): it dials peers directly and advertises the configured address. With tls
// set, every connection is mutual TLS (tls.go).
type tcpStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	tls       *TransportTLS
	// refused counts and logs the accepted connections whose handshake failed (nil:
	// neither).
	refused *handshakeFailures
}

func (s *tcpStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tls != nil {
		return s.dialTLS(addr, timeout)
	}
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (s *tcpStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil || s.tls == nil {
		return c, err
	}
	return newServerConn(c, s.tls.Server, s.refused), nil
}

func (s *tcpStreamLayer) Close() error { return s.ln.Close() }

func (s *tcpStreamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}
