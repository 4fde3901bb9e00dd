package registry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/store"
)

// Agreement on ACLs. Every node of a cluster must run with --acl-enabled, or none.
// ACLGate refuses every request of a node started without the flag once the replicated
// state says the cluster's ACLs are bootstrapped; what is here makes that visible and
// keeps such a node from stalling the cluster (the server runs both: ACLAgreement):
//
//   - WatchAgreement follows the replicated ACL state (not the requests, so an
//     idle node reports too) and logs each change of this node's agreement once: an
//     ERROR when the node refuses to serve because it lacks the flag, a WARN while a
//     node with the flag waits for the cluster's bootstrap (it answers 401), an INFO
//     when that wait ends.
//   - HandOffWhileMismatched runs on every leadership term: a leader that refuses to
//     serve would make the whole cluster refuse writes (followers forward them to it),
//     so it hands leadership to another voter, retrying while that fails (the first
//     attempt of a term is logged at ERROR, later ones at DEBUG).

// aclRecheck is how often WatchAgreement looks again at a node that has not caught
// up with the leader yet: what its copy of the ACL state says is not the cluster's word
// before that.
const aclRecheck = time.Second

// aclHandoffInterval is the least time between two hand-overs by a leader that refuses
// to serve, and how soon a failed one is tried again: two such nodes elected in turn
// would otherwise pass leadership back and forth as fast as elections go.
const aclHandoffInterval = 5 * time.Second

// aclAgreement is what this node's configuration and its copy of the replicated ACL
// state say together.
type aclAgreement int

const (
	aclAgree        aclAgreement = iota // both off, or both on and bootstrapped
	aclMismatch                         // no --acl-enabled, the cluster's ACLs are bootstrapped
	aclNotBootstrap                     // --acl-enabled, the cluster's ACLs are not bootstrapped yet
)

// aclAgreementNow reads the agreement from the node's state (the bootstrap index is
// held in memory, so this costs no transaction); gate is the ACL gate's error.
func (s *ACLAgreement) aclAgreementNow() (aclAgreement, uint64, error) {
	if gate := s.reg.ACLGate(); gate != nil {
		if errors.Is(gate, acl.ErrMismatch) {
			boot, _ := s.reg.tokens.ACLBootstrapIndex()
			return aclMismatch, boot, gate
		}
		return aclAgree, 0, gate
	}
	if !s.reg.ACLEnabled() {
		return aclAgree, 0, nil
	}
	boot, err := s.reg.tokens.ACLBootstrapIndex()
	if err != nil {
		return aclAgree, 0, err
	}
	if boot == 0 {
		return aclNotBootstrap, 0, nil
	}
	return aclAgree, boot, nil
}

// watchACLChanges adds to ws the watch of the replicated ACL state: it fires on every
// bootstrap, token change and restore. Call it before reading the state, so that a
// change in between wakes ws.
func (s *ACLAgreement) watchACLChanges(ws *store.WatchSet) error {
	_, _, err := s.reg.tokens.Tokens(ws)
	return err
}

// WatchAgreement logs every change of this node's ACL agreement, once, until ctx ends.
func (s *ACLAgreement) WatchAgreement(ctx context.Context) {
	logged := aclAgree
	for {
		ws := store.NewWatchSet()
		if err := s.watchACLChanges(ws); err != nil {
			if errors.Is(err, store.ErrClosed) {
				return
			}
			s.log.Warn("reading the ACL state failed", "err", err)
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		state, boot, err := s.aclAgreementNow()
		switch {
		case err != nil && state != aclMismatch:
			s.log.Warn("reading the ACL state failed", "err", err)
			wctx, cancel = context.WithTimeout(ctx, aclRecheck)
		case state == logged:
		case state == aclMismatch:
			s.log.Error("ACL mismatch: the cluster has ACLs enabled but this node was started without --acl-enabled; "+
				"it serves nothing (503 acl_mismatch), reports not ready and hands leadership away; restart it with --acl-enabled",
				"acl_bootstrap_index", boot)
			logged = state
		case state == aclNotBootstrap:
			// A node that has not caught up yet may simply not have received the
			// bootstrap: say it only once its state is the cluster's.
			if !s.ready() {
				wctx, cancel = context.WithTimeout(ctx, aclRecheck)
				break
			}
			s.log.Warn("ACLs are enabled on this node but the cluster has not bootstrapped them: every request but the status routes and " +
				"POST /v1/acl/bootstrap is refused with 401 until roster acl bootstrap runs; if the cluster is meant to run without ACLs, " +
				"restart this node without --acl-enabled")
			logged = state
		case logged == aclNotBootstrap:
			s.log.Info("ACLs bootstrapped: this node serves requests that carry a token", "acl_bootstrap_index", boot)
			logged = state
		default:
			// A mismatch ends only with a restart (a bootstrap is never undone); should
			// the state ever say otherwise, the node serves again, and says so.
			s.log.Info("ACL mismatch cleared: this node and the cluster agree on ACLs again")
			logged = state
		}
		ws.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// ACLAgreement watches this node's agreement with the cluster on ACLs and hands
// leadership away while it refuses to serve for lack of --acl-enabled.
type ACLAgreement struct {
	reg      *Registry
	log      *slog.Logger
	ready    func() bool                     // this node has applied what it knows is committed
	transfer func(ctx context.Context) error // hands leadership to another voter
	last     aclHandoff
}

// NewACLAgreement returns the ACL agreement of r's node: ready reports whether the node
// has caught up with the cluster, transfer hands its leadership to another voter. r must
// read the replicated tokens (Config.Tokens).
func (r *Registry) NewACLAgreement(ready func() bool, transfer func(ctx context.Context) error) (*ACLAgreement, error) {
	if r.tokens == nil {
		return nil, errors.New("registry: the ACL agreement needs Config.Tokens")
	}
	return &ACLAgreement{reg: r, log: r.log, ready: ready, transfer: transfer}, nil
}

// aclHandoff remembers when this node last handed leadership away for lack of
// --acl-enabled (leadership terms may briefly overlap their callbacks).
type aclHandoff struct {
	mu   sync.Mutex
	last time.Time
}

// HandOffWhileMismatched runs for each leadership term of this node (raftnode's
// OnLeadership). While the node refuses to serve for lack of --acl-enabled, every
// request the followers forward to it is refused too, so the whole cluster could not
// write: it hands leadership to another voter, and tries again every
// aclHandoffInterval while it fails (a single-node cluster, the other voters down).
// ctx ends with the term.
func (s *ACLAgreement) HandOffWhileMismatched(ctx context.Context) {
	attempts := 0
	for {
		ws := store.NewWatchSet()
		if err := s.watchACLChanges(ws); errors.Is(err, store.ErrClosed) {
			return
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if state, _, _ := s.aclAgreementNow(); state == aclMismatch {
			wctx, cancel = context.WithTimeout(ctx, s.handOff(ctx, &attempts))
		}
		ws.Wait(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// handOff transfers leadership to another voter, unless this node did so less than
// aclHandoffInterval ago; it returns how long to wait before trying again. attempts
// counts the term's attempts: only the first is logged at ERROR, so that a node that
// cannot hand over (no other voter) does not fill the log.
func (s *ACLAgreement) handOff(ctx context.Context, attempts *int) time.Duration {
	s.last.mu.Lock()
	if wait := time.Until(s.last.last.Add(aclHandoffInterval)); wait > 0 {
		s.last.mu.Unlock()
		return wait
	}
	s.last.last = time.Now()
	s.last.mu.Unlock()
	*attempts++
	level := slog.LevelError
	if *attempts > 1 {
		level = slog.LevelDebug
	}
	s.log.Log(ctx, level, "ACL mismatch: this node leads but refuses every request for lack of --acl-enabled, so the cluster could not write; "+
		"handing leadership to another voter", "attempt", *attempts)
	if err := s.transfer(ctx); err != nil {
		if ctx.Err() == nil {
			s.log.Log(ctx, level, "ACL mismatch: handing leadership away failed; the cluster refuses writes while this node leads",
				"err", err, "retry_in", aclHandoffInterval.String())
		}
		return aclHandoffInterval
	}
	s.log.Info("leadership handed away for lack of --acl-enabled")
	return aclHandoffInterval
}
