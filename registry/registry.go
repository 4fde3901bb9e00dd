// Package registry is Roster's application service: the one place where a request to
// change or read the registry becomes a Raft command or a consistency-checked read.
//
// Every surface — the native REST API, the Nacos HTTP and gRPC APIs — only translates
// for a Registry: it parses its own wire format into model types, calls the Registry,
// and renders the result. The Registry admits writes (the model's Admit* rules, under
// the cluster-wide settings held in the replicated state; the state machine applies
// entries under the Validate* rules only), builds the typed command, wraps it in a
// conditional (CAS) command when asked, and submits it through Raft, or, on a
// follower, hands it to the leader's Registry (forward.go); it runs reads under the
// requested consistency, asking the leader for a read index on a follower, as blocking
// queries when asked. The health prober's transitions keep their own path (healthcheck
// submits SetHealth itself).
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// DefaultRequestTimeout bounds a write's Apply and a read's consistency check.
const DefaultRequestTimeout = 10 * time.Second

// Raft is what the registry needs of the consensus layer (*raftnode.Node implements it).
type Raft interface {
	// Apply replicates one command and returns its index once applied locally; the
	// state machine's domain error is returned as the error. Leader only.
	Apply(ctx context.Context, cmd fsm.Command) (uint64, error)
	// IsLeader reports whether this node is the leader now.
	IsLeader() bool
	// ConsistentRead returns once a linearizable read of the local store is safe.
	ConsistentRead(ctx context.Context) error
	// LeaderRead returns once a leader-local read of the local store is allowed.
	LeaderRead(ctx context.Context) error
}

// SettingsSource reads the cluster-wide settings from the local replicated state
// (*store.Store implements it).
type SettingsSource interface {
	Settings(ws *store.WatchSet) (uint64, model.Settings, error)
}

// ClusterSource reads a cluster from the local replicated state (*store.Store
// implements it).
type ClusterSource interface {
	Cluster(ws *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error)
}

// Config configures a Registry. Settings and Raft are required.
type Config struct {
	// Settings reads the cluster-wide settings writes are admitted under.
	Settings SettingsSource
	// Raft is the consensus layer.
	Raft Raft
	// RequestTimeout bounds a write's Apply and a read's consistency check (default 10s).
	RequestTimeout time.Duration
	// StateAlarm, when set and returning an error, refuses every read: the node's state
	// was found to differ from its peers' (the error wraps ErrStateMismatch).
	StateAlarm func() error
	// Watchers bounds the blocking queries (and, through HoldWatcher, the streams) the
	// node holds at once; nil: no bound.
	Watchers *Watchers
	// ACLEnabled turns access control on for this node (roster server --acl-enabled);
	// Tokens, required with it, reads the replicated tokens. A node without ACLs still
	// reads Tokens, when set, to refuse serving a cluster that has them.
	ACLEnabled bool
	Tokens     TokenSource
	// Clusters reads the stored clusters (a write that keeps a health check's
	// password reads it there); nil: Settings, when it implements ClusterSource.
	Clusters ClusterSource
	// Coalesce, when set, gathers concurrent writes into one Raft entry through it
	// (coalesce.go); nil: every write is its own entry, through Raft.Apply.
	Coalesce Proposer
	// Metrics registers the registry's metrics (nil: none).
	Metrics prometheus.Registerer
	// RefuseConfusableNames refuses the writes that create or replace something under a
	// service name that mixes scripts or holds fullwidth forms (model.ConfusableName);
	// without it they are admitted and logged once per name. A rule of this node, not
	// replicated: it applies where a write is admitted, the leader.
	RefuseConfusableNames bool
	// Logger receives the registry's warnings (nil: none).
	Logger *slog.Logger
	// Peer, when set, hands the writes that reach this node while it does not lead to
	// the leader, and asks the leader for the read index of a consistent read served
	// here (forward.go); nil: such writes and reads fail with the consensus layer's
	// not-leader error and the surface forwards them. With Peer, Raft must implement
	// FollowerReads.
	Peer Peer
	// NodeID is this node's server id (required with Peer).
	NodeID string
	// LeaderHold bounds how long a write waits for a leader to send it to (default
	// DefaultLeaderHold).
	LeaderHold time.Duration
}

// WatchSet is what a read registers to be woken by changes of what it read (a blocking
// query's; the store's type, named here so that the surfaces need not know the store).
type WatchSet = store.WatchSet

// ErrStateMismatch refuses reads on a node whose state differs from its peers'.
var ErrStateMismatch = errors.New("state_mismatch")

// Registry is the application service. It is safe for concurrent use.
type Registry struct {
	settings SettingsSource
	raft     Raft
	timeout  time.Duration
	alarm    func() error
	watchers *Watchers
	aclOn    bool
	tokens   TokenSource
	clusters ClusterSource
	coalesce *coalescer // nil: writes go through raft.Apply one by one
	// tokenMu serializes token deletions' checks with their writes (DeleteToken).
	tokenMu sync.Mutex
	// confusable handles confusable service names.
	confusable *confusables
	// peer, nodeID and leaderHold forward writes to the leader (forward.go).
	peer       Peer
	nodeID     string
	leaderHold time.Duration
	fwdMet     *forwardMetrics
	// reads is Raft's FollowerReads (nil without a Peer).
	reads FollowerReads
	// lastForwarded is the highest index of a write the leader acknowledged to this node.
	lastForwarded atomic.Uint64
	log           *slog.Logger
}

// New returns a Registry.
func New(cfg Config) (*Registry, error) {
	if cfg.Settings == nil || cfg.Raft == nil {
		return nil, errors.New("registry: Config.Settings and Config.Raft are required")
	}
	if cfg.ACLEnabled && cfg.Tokens == nil {
		return nil, errors.New("registry: Config.Tokens is required with ACLEnabled")
	}
	if cfg.RequestTimeout < 0 {
		return nil, errors.New("registry: RequestTimeout must not be negative")
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Clusters == nil {
		cfg.Clusters, _ = cfg.Settings.(ClusterSource)
	}
	if cfg.Peer != nil && cfg.NodeID == "" {
		return nil, errors.New("registry: Config.NodeID is required with Peer")
	}
	var reads FollowerReads
	if cfg.Peer != nil {
		var ok bool
		if reads, ok = cfg.Raft.(FollowerReads); !ok {
			return nil, errors.New("registry: with Config.Peer, Config.Raft must implement FollowerReads")
		}
	}
	if cfg.LeaderHold <= 0 {
		cfg.LeaderHold = DefaultLeaderHold
	}
	r := &Registry{settings: cfg.Settings, raft: cfg.Raft, timeout: cfg.RequestTimeout, alarm: cfg.StateAlarm,
		watchers: cfg.Watchers, aclOn: cfg.ACLEnabled, tokens: cfg.Tokens, clusters: cfg.Clusters,
		confusable: newConfusables(cfg.RefuseConfusableNames, cfg.Logger),
		peer:       cfg.Peer, nodeID: cfg.NodeID, leaderHold: cfg.LeaderHold, reads: reads, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	met, err := newForwardMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	r.fwdMet = met
	if cfg.Coalesce != nil {
		met, err := newCoalesceMetrics(cfg.Metrics)
		if err != nil {
			return nil, err
		}
		r.coalesce = newCoalescer(cfg.Coalesce, cfg.RequestTimeout, met)
	}
	return r, nil
}

// IsLeader reports whether this node is the leader.
func (r *Registry) IsLeader() bool { return r.raft.IsLeader() }

// ReachesLeader reports whether this registry reaches the leader itself (a Peer is
// configured): it hands writes to the leader and serves consistent reads from this
// node's state after asking the leader for a read index, so the surfaces serve every
// request where it arrived. Without it, writes and reads that are not stale must be
// sent to the leader by the surface.
func (r *Registry) ReachesLeader() bool { return r.peer != nil && r.reads != nil }

// NeedsLeader reports whether a read under mode must be served by the leader when the
// node reading cannot reach it itself (ReachesLeader false).
func NeedsLeader(mode Consistency) bool { return mode != Stale }

// Settings returns the cluster-wide settings as this node's state has them.
func (r *Registry) Settings() (model.Settings, error) {
	_, s, err := r.settings.Settings(nil)
	return s, err
}

// Limits returns the admission bounds of the current settings (the defaults if the
// settings cannot be read, which only happens on a closed store).
func (r *Registry) Limits() model.Limits {
	s, err := r.Settings()
	if err != nil {
		return model.DefaultLimits()
	}
	return s.Limits()
}

// Consistency is a read mode.
type Consistency string

// Read modes: Linearizable (the default) confirms leadership with a quorum, Leader
// reads the leader's state without that round trip, Stale reads this node's state.
const (
	Linearizable Consistency = "linearizable"
	Leader       Consistency = "leader"
	Stale        Consistency = "stale"
)

// ReadOptions are a read's permission, consistency and blocking parameters.
type ReadOptions struct {
	// Permission is what the read needs (checked with Authorize before anything is
	// read): a namespace's read access, operator or ACL read access, or Authenticated
	// for a list the caller filters. With ACLs on, a read that names none is refused.
	Permission acl.Permission
	// Namespace, when set, is the namespace whose data the read fetches: the read then
	// needs read access to it, derived here from the key fn reads rather than taken
	// from the route (both are checked when both are set).
	Namespace   string
	Consistency Consistency // empty: Linearizable
	// Blocking makes the read a blocking query: it returns once the index read is
	// above MinIndex, or when Wait (plus jitter up to Wait/16) has passed.
	Blocking bool
	MinIndex uint64
	Wait     time.Duration
}

// Read runs fn, a read of the local state, under o: it first waits until a read in o's
// consistency mode is allowed on this node (an error wrapping raftnode.ErrNotLeader
// when it must be served by the leader instead), then runs fn once, or until its index
// passes o.MinIndex for a blocking query. fn registers what it read in ws (nil for a
// plain read) and returns the index of the data it read; the last run's data is what
// the caller answers with.
func (r *Registry) Read(ctx context.Context, o ReadOptions, fn func(ws *WatchSet) (uint64, error)) (uint64, error) {
	if err := r.authorizeRead(ctx, o); err != nil {
		return 0, err
	}
	atLeader := o.Consistency != Stale && r.readsAtLeader()
	if err := r.CheckConsistency(ctx, o.Consistency); err != nil {
		return 0, err
	}
	if atLeader && r.aclOn {
		// This follower has applied the leader's read index: check the caller's token
		// again as this state has it, so that the read honours a token change the
		// leader committed before the read began, as a read at the leader would.
		a := acl.FromContext(ctx)
		if a == nil {
			return 0, fmt.Errorf("%w: no token", acl.ErrUnauthenticated)
		}
		fresh, err := r.Authenticate(a.Secret())
		if err != nil {
			return 0, err
		}
		if err := r.authorizeRead(acl.WithAuthorizer(ctx, fresh), o); err != nil {
			return 0, err
		}
	}
	if !o.Blocking {
		return fn(nil)
	}
	if !r.watchers.Acquire() {
		return 0, r.watchers.refused()
	}
	defer r.watchers.Release()
	ctx, cancel := context.WithTimeout(ctx, withJitter(o.Wait))
	defer cancel()
	for {
		ws := store.NewWatchSet()
		idx, err := fn(ws)
		if err != nil || idx > o.MinIndex {
			return idx, err
		}
		if !ws.Wait(ctx) {
			return idx, nil
		}
	}
}

// authorizeRead checks the permissions a read under o needs.
func (r *Registry) authorizeRead(ctx context.Context, o ReadOptions) error {
	if o.Permission == (acl.Permission{}) && o.Namespace == "" && r.aclOn {
		return fmt.Errorf("%w: the read names no permission", acl.ErrPermissionDenied)
	}
	if o.Namespace != "" {
		if err := r.Authorize(ctx, acl.NamespacePermission(o.Namespace, acl.Read)); err != nil {
			return err
		}
	}
	if o.Permission != (acl.Permission{}) {
		return r.Authorize(ctx, o.Permission)
	}
	return nil
}

// HoldWatcher takes a place for a stream under the node's watcher bound; release gives
// it back. It fails with ErrTooManyWatchers when the node holds its limit.
func (r *Registry) HoldWatcher() (release func(), err error) {
	if !r.watchers.Acquire() {
		return nil, r.watchers.refused()
	}
	return r.watchers.Release, nil
}

// CheckConsistency waits, within the request timeout, until reading the local state is
// allowed in mode (for reads that do not go through Read, such as a snapshot's). On a
// follower with a Peer, a consistent read asks the leader for its read index and waits
// until this node has applied it.
func (r *Registry) CheckConsistency(ctx context.Context, mode Consistency) error {
	if r.alarm != nil {
		if err := r.alarm(); err != nil {
			return fmt.Errorf("%w: this node serves no reads: %v", ErrStateMismatch, err)
		}
	}
	if mode != Stale && r.readsAtLeader() {
		ctx, cancel := context.WithTimeout(ctx, r.timeout+r.leaderHold)
		defer cancel()
		return r.followerRead(ctx, mode)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.localConsistency(ctx, mode)
}

// localConsistency is CheckConsistency's check of this node's own standing.
func (r *Registry) localConsistency(ctx context.Context, mode Consistency) error {
	switch mode {
	case Linearizable, "":
		return r.raft.ConsistentRead(ctx)
	case Leader:
		return r.raft.LeaderRead(ctx)
	default:
		return nil
	}
}

// withJitter adds a random duration up to d/16, so that many clients blocked with the
// same wait do not all come back at once.
func withJitter(d time.Duration) time.Duration {
	if j := int64(d / 16); j > 0 {
		return d + time.Duration(rand.Int64N(j))
	}
	return d
}
