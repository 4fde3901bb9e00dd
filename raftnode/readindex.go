package raftnode

import (
	"context"
	"fmt"
	"sync"
)

// verifyRound is one leadership confirmation shared by the linearizable reads that
// joined it: commit is the commit index read when the round began, err the outcome of
// its VerifyLeader.
type verifyRound struct {
	done   chan struct{}
	commit uint64
	err    error
}

// verifier batches the leadership confirmations of concurrent linearizable reads (the
// read-index batching etcd does): a read joins the next round to begin, never one that
// is already under way, so every round a read relies on began after the read did; its
// commit index and the quorum's answer are both from after the read began. At most one
// round runs at a time, and the next one starts as soon as it ends, for all the reads
// that arrived meanwhile: under load, one VerifyLeader (one heartbeat round on each
// follower) serves many reads instead of one each.
type verifier struct {
	mu      sync.Mutex
	running bool         // a round is under way
	next    *verifyRound // the round new reads join; nil: none yet
}

// confirm returns the commit index as of a quorum-confirmed moment after the call
// began, or why leadership could not be confirmed.
func (n *Node) confirm(ctx context.Context) (uint64, error) {
	v := &n.verify
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyRound{done: make(chan struct{})}
	}
	r := v.next
	if !v.running {
		n.startRoundLocked()
	}
	v.mu.Unlock()
	n.met.readsJoined.Inc()
	select {
	case <-r.done:
		return r.commit, r.err
	case <-ctx.Done():
		return 0, n.ctxErr(ctx)
	case <-n.ctx.Done():
		return 0, ErrShutdown
	}
}

// startRoundLocked begins the round reads are joining (n.verify.mu held).
func (n *Node) startRoundLocked() {
	v := &n.verify
	r := v.next
	v.next, v.running = nil, true
	go n.runRound(r)
}

// runRound confirms leadership once for every read of r, then starts the next round if
// reads arrived meanwhile. The confirmation is bounded by ApplyTimeout, as a write is;
// each read still gives up at its own deadline.
func (n *Node) runRound(r *verifyRound) {
	n.met.readRounds.Inc()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
	r.commit = n.raft.CommitIndex()
	r.err = n.await(ctx, n.raft.VerifyLeader())
	cancel()
	close(r.done)
	v := &n.verify
	v.mu.Lock()
	defer v.mu.Unlock()
	v.running = false
	if v.next != nil {
		n.startRoundLocked()
	}
}

// ReadIndex serves a read on another server (registry.FollowerReads): on the leader, it
// returns the state index that server must have applied for a read of its own state to
// be linearizable (linearizable: the commit index of a quorum-confirmed moment after the
// call began, as ConsistentRead's) or to see this leader's state (otherwise: the commit
// index of a ready leader, as LeaderRead's). It fails as ConsistentRead and LeaderRead do.
func (n *Node) ReadIndex(ctx context.Context, linearizable bool) (uint64, error) {
	term, err := n.waitLeaderReady(ctx)
	if err != nil {
		return 0, err
	}
	commit := n.raft.CommitIndex()
	if linearizable {
		if commit, err = n.confirm(ctx); err != nil {
			return 0, err
		}
	}
	if n.raft.CurrentTerm() != term {
		return 0, fmt.Errorf("%w: term changed during the read", ErrLeadershipLost)
	}
	return n.stateIndex(commit), nil
}
