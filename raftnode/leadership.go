package raftnode

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/fsm"
)

// leadership is this node's current leadership, guarded by Node.mu. Each gain of
// leadership gets a new generation; ctx is cancelled the moment it is lost.
type leadership struct {
	gen    uint64
	active bool      // Raft reported this node as leader and has not reported the loss
	ready  bool      // every entry of earlier terms is applied and the self record committed
	term   uint64    // the term ready refers to
	since  time.Time // when Raft reported this leadership
	ctx    context.Context
	cancel context.CancelFunc
}

// Backoff bounds of the leader's establishing steps.
const (
	establishRetryMin = 50 * time.Millisecond
	establishRetryMax = 2 * time.Second
)

// OnLeadership registers fn to run, in its own goroutine, each time this node becomes
// leader and has applied every entry of earlier terms. fn's ctx is cancelled the
// moment leadership is lost and on Shutdown; fn must return soon after. If the node
// is a ready leader when fn is registered, fn starts at once for the current term.
// Shutdown waits for every fn to return.
func (n *Node) OnLeadership(fn func(ctx context.Context)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.callbacks = append(n.callbacks, fn)
	if n.lead.ready && n.lead.ctx.Err() == nil {
		n.startCallbackLocked(n.lead.ctx, fn)
	}
}

func (n *Node) startCallbackLocked(ctx context.Context, fn func(context.Context)) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn(ctx)
	}()
}

// observe follows Raft's leadership notifications (every transition, in order) and
// starts or ends a leadership generation. It never blocks Raft.
func (n *Node) observe() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			n.endLeadership()
			return
		case isLeader := <-n.notifyCh:
			if isLeader {
				n.beginLeadership()
			} else {
				n.endLeadership()
			}
		}
	}
}

func (n *Node) beginLeadership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.endLeadershipLocked()
	if n.closed {
		return
	}
	ctx, cancel := context.WithCancel(n.ctx)
	n.lead = leadership{gen: n.lead.gen + 1, active: true, since: time.Now(), ctx: ctx, cancel: cancel}
	n.signalLocked()
	n.log.Info("gained leadership", "term", n.raft.CurrentTerm())
	// The builds announced to an earlier leadership may be stale: every follower
	// announces itself to this one.
	n.commands.forget()
	if n.refuseLeadershipWhileHalted() {
		return
	}
	n.wg.Add(1)
	go n.establish(ctx, n.lead.gen)
}

func (n *Node) endLeadership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.endLeadershipLocked()
}

func (n *Node) endLeadershipLocked() {
	if !n.lead.active {
		return
	}
	n.lead.cancel()
	n.lead.active, n.lead.ready = false, false
	n.signalLocked()
	n.log.Info("lost leadership")
}

// signalLocked wakes everyone waiting for a leadership change.
func (n *Node) signalLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// establish makes a new leader ready: a barrier (every entry of earlier terms is
// applied), then this node's member record is committed so every node learns the
// leader's HTTP address; then the generation is marked ready and the callbacks start.
func (n *Node) establish(ctx context.Context, gen uint64) {
	defer n.wg.Done()
	term := n.raft.CurrentTerm()
	retry := func(step string, err error, wait *time.Duration) bool {
		if ctx.Err() != nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrShutdown) {
			return false
		}
		n.log.Warn("leader establishment step failed; retrying", "step", step, "error", err, "retry_in", *wait)
		ok := sleepCtx(ctx, *wait)
		*wait = min(*wait*2, establishRetryMax)
		return ok
	}
	wait := establishRetryMin
	for {
		err := n.await(ctx, n.raft.Barrier(n.cfg.ApplyTimeout))
		if err == nil {
			break
		}
		if !retry("barrier", err, &wait) {
			return
		}
	}
	wait = establishRetryMin
	for {
		_, err := n.Apply(ctx, fsm.UpsertMemberRequest{Member: n.self()})
		if err == nil {
			break
		}
		if isRaftErr(err) {
			if !retry("record member", err, &wait) {
				return
			}
			continue
		}
		// A domain error (the record itself was refused) is deterministic: retrying
		// cannot help, and the barrier already made the state complete.
		n.log.Error("leader could not record its own member addresses", "error", err)
		break
	}
	n.markReady(gen, term)
}

// isRaftErr reports whether err came from replication rather than from the state machine.
func isRaftErr(err error) bool {
	for _, s := range []error{ErrNotLeader, ErrLeadershipLost, ErrTimeout, ErrShutdown, ErrStorage} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// markReady marks generation gen ready if it is still current and Raft is still the
// leader of the term the barrier ran in, then starts the callbacks.
func (n *Node) markReady(gen, term uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.lead.gen != gen || !n.lead.active || n.lead.ctx.Err() != nil {
		return
	}
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return
	}
	n.lead.ready, n.lead.term = true, term
	n.signalLocked()
	n.log.Info("leader ready", "term", term)
	for _, fn := range n.callbacks {
		n.startCallbackLocked(n.lead.ctx, fn)
	}
}

// leaderReady reports whether this node is a ready leader of Raft's current term.
func (n *Node) leaderReady() bool {
	n.mu.Lock()
	ready, term := n.lead.ready, n.lead.term
	n.mu.Unlock()
	return ready && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term
}

// waitLeaderReady returns the term once this node is a ready leader. It fails at once
// with ErrNotLeader when Raft says this node is not the leader, and waits (bounded by
// ctx) while a new leader is still establishing.
func (n *Node) waitLeaderReady(ctx context.Context) (uint64, error) {
	for {
		if n.isClosed() {
			return 0, ErrShutdown
		}
		if ctx.Err() != nil {
			return 0, n.ctxErr(ctx)
		}
		if n.raft.State() != raft.Leader {
			return 0, n.notLeaderErr(nil)
		}
		n.mu.Lock()
		ready, term, changed := n.lead.ready, n.lead.term, n.changed
		n.mu.Unlock()
		if ready && n.raft.CurrentTerm() == term {
			return term, nil
		}
		// Raft may report the leader state before the observer has processed the
		// notification; the short timer covers transitions without a signal.
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, n.ctxErr(ctx)
		case <-n.ctx.Done():
			t.Stop()
			return 0, ErrShutdown
		}
		t.Stop()
	}
}
