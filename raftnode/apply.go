package raftnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/fsm"
)

// Apply commits one command through Raft and waits until the leader's state machine
// applied it. It runs on the leader only (ErrNotLeader elsewhere). It returns the
// entry's index; a domain error of the state machine (fsm.Result.Err) is returned as
// the error, so store sentinels stay matchable with errors.Is. ErrLeadershipLost and
// ErrTimeout after enqueueing mean the outcome is unknown. (A BatchRequest's
// per-command results need Propose.)
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (uint64, error) {
	p, err := n.Propose(ctx, cmd)
	if err != nil {
		return 0, err
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return 0, err
	}
	return res.Index, res.Err
}

// Proposal is a command handed to Raft whose outcome is not known yet (Propose).
type Proposal struct {
	n     *Node
	f     raft.ApplyFuture
	start time.Time
	once  sync.Once
}

// Propose hands cmd to Raft and returns as soon as the leader's main loop took it,
// without waiting for it to commit: the caller can hand over the next command while
// this one is written and replicated. The command is written as every server applies
// it (Prepare): in an older encoding while some server applies only that, refused with
// an *UpgradeRequiredError while some server cannot apply it at all. The errors are
// Apply's before enqueueing (not applied). Wait must be called: a stopping node waits
// for every proposal before it hands leadership over.
func (n *Node) Propose(ctx context.Context, cmd fsm.Command) (*Proposal, error) {
	if err := n.enterProposal(); err != nil {
		return nil, err
	}
	cmd, err := n.Prepare(ctx, cmd)
	if err != nil {
		n.gate.leave()
		return nil, err
	}
	buf, err := fsm.Encode(cmd)
	if err != nil {
		n.gate.leave()
		return nil, fmt.Errorf("raftnode: encode command %s: %w", cmd.MessageType(), err)
	}
	return n.proposeEntered(ctx, buf)
}

// ProposeEncoded is Propose of a command the caller prepared (Prepare) and encoded
// (fsm.Encode) itself: the bytes become the log entry as they are.
func (n *Node) ProposeEncoded(ctx context.Context, data []byte) (*Proposal, error) {
	if err := n.enterProposal(); err != nil {
		return nil, err
	}
	return n.proposeEntered(ctx, data)
}

// enterProposal enters the gate a stopping leader closes, on a leader that is not shut
// down; the caller leaves it (through the Proposal, or at once on an error of its own).
func (n *Node) enterProposal() error {
	if n.isClosed() {
		return ErrShutdown
	}
	if !n.gate.enter() {
		return fmt.Errorf("%w: %w", ErrNotLeader, errHandingOver)
	}
	if n.raft.State() != raft.Leader {
		n.gate.leave()
		return n.notLeaderErr(nil)
	}
	return nil
}

// proposeEntered hands buf to Raft; the caller entered the gate.
func (n *Node) proposeEntered(ctx context.Context, buf []byte) (*Proposal, error) {
	timeout, err := n.enqueueTimeout(ctx)
	if err != nil {
		n.gate.leave()
		return nil, err
	}
	return &Proposal{n: n, f: n.raft.Apply(buf, timeout), start: time.Now()}, nil
}

// Wait waits until the proposal was committed and applied by this node's state machine
// and returns the state machine's result (Result.Err or Result.Batch hold the state's
// refusals). An error is Raft's: ErrLeadershipLost and ErrTimeout mean the outcome is
// unknown. Only the first call waits for ctx; a proposal is answered once.
func (p *Proposal) Wait(ctx context.Context) (*fsm.Result, error) {
	defer p.once.Do(p.n.gate.leave)
	err := p.n.await(ctx, p.f)
	p.n.met.apply.Observe(time.Since(p.start).Seconds())
	if err != nil {
		return nil, err
	}
	switch res := p.f.Response().(type) {
	case *fsm.Result:
		return res, nil
	case error:
		return &fsm.Result{Index: p.f.Index(), Err: res}, nil
	default:
		return nil, fmt.Errorf("raftnode: unexpected state machine response %T", res)
	}
}

// enqueueTimeout is the Raft enqueue timeout: ApplyTimeout, shortened to ctx's deadline.
func (n *Node) enqueueTimeout(ctx context.Context) (time.Duration, error) {
	if ctx.Err() != nil {
		return 0, n.ctxErr(ctx)
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return 0, fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
		}
		timeout = min(timeout, left)
	}
	return timeout, nil
}

// await waits for a Raft future, for ctx and for Shutdown, and maps Raft's errors.
// Raft never answers some futures once it has shut down, so the wait runs in a
// goroutine that the caller does not wait for.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return n.mapRaftErr(err)
	case <-ctx.Done():
	case <-n.ctx.Done():
	}
	select {
	case err := <-done: // answered at the same moment: the answer wins
		return n.mapRaftErr(err)
	default:
	}
	if n.ctx.Err() != nil {
		return ErrShutdown
	}
	return n.ctxErr(ctx)
}

// LeaderRead succeeds when this node is the leader and has applied every entry of
// earlier terms, so its local state includes every acknowledged write — unless a
// newer leader was elected that this node has not heard of yet (no quorum round
// trip). On a leader that is still catching up it waits, bounded by ctx.
func (n *Node) LeaderRead(ctx context.Context) error {
	_, err := n.waitLeaderReady(ctx)
	return err
}

// ConsistentRead makes the local state safe for a linearizable read: the node is a
// ready leader, a quorum confirms it is still the leader after the read began, and
// the state machine has applied everything committed when the read began.
// It fails with ErrNotLeader on a follower and with ErrNotLeader, ErrLeadershipLost or
// ErrTimeout on a leader that cannot reach a quorum.
func (n *Node) ConsistentRead(ctx context.Context) error {
	term, err := n.waitLeaderReady(ctx)
	if err != nil {
		return err
	}
	commit, err := n.confirm(ctx)
	if err != nil {
		return err
	}
	if n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: term changed during the read", ErrLeadershipLost)
	}
	if err := n.sm.WaitApplied(ctx, n.stateIndex(commit)); err != nil {
		if ctx.Err() != nil {
			return n.ctxErr(ctx)
		}
		return fmt.Errorf("raftnode: wait for apply: %w", err)
	}
	return nil
}

// CatchUp returns once the state machine has applied every entry this node knows to be
// committed and at least index min (a write acknowledged elsewhere): a local read then
// sees them. It is for reads served from a follower's own state; it does not ask the
// leader anything, so a follower cut off from the leader catches up with what it knows.
func (n *Node) CatchUp(ctx context.Context, min uint64) error {
	target := max(n.stateIndex(n.raft.CommitIndex()), min)
	if err := n.sm.WaitApplied(ctx, target); err != nil {
		if ctx.Err() != nil {
			return n.ctxErr(ctx)
		}
		return fmt.Errorf("raftnode: wait for apply: %w", err)
	}
	return nil
}

// Readiness is Ready's report on this node.
type Readiness struct {
	// Ready is Ready's first result.
	Ready bool
	// Leader is the id of the leader this node knows ("" when none).
	Leader string
	// AppliedIndex is the index up to which every entry is reflected in the state.
	AppliedIndex uint64
	// CommitIndex is the commit index this node knows.
	CommitIndex uint64
	// LeaderCommitIndex is the highest commit index a leader has sent this node (its own
	// on the leader): a follower that cannot write its log knows it while its own commit
	// index stays behind.
	LeaderCommitIndex uint64
	// ClusterID is the cluster's identity ("" until the first leader set it).
	ClusterID string
	// Reason says why the node is not ready ("" when it is).
	Reason string
	// Halt is the committed entry this node's state machine stopped at, because this
	// build cannot apply it (nil: none); Reason then says so.
	Halt *fsm.Halt
	// Build and NewestCommand are this node's build and the newest command type it applies.
	Build         buildinfo.Info
	NewestCommand uint8
}

// Ready reports whether this node can serve reads from its local state: a leader is
// known and the state machine has applied everything this node knows to be committed
// (on the leader, also every entry of earlier terms). AppliedIndex in the report is
// the index up to which every entry is reflected in the state.
func (n *Node) Ready() (bool, Readiness) {
	var rep Readiness
	if n.isClosed() {
		rep.Reason = "shut down"
		return false, rep
	}
	_, id := n.raft.LeaderWithID()
	rep.Leader = string(id)
	commit := n.raft.CommitIndex()
	applied := n.sm.AppliedIndex()
	rep.CommitIndex = commit
	rep.AppliedIndex = applied
	rep.LeaderCommitIndex = max(n.commit.idx.Load(), commit)
	rep.ClusterID = n.ClusterID()
	_, appendErr := n.append.failing()
	var applyErr, alarm error
	if s, ok := n.sm.(interface{ Stalled() error }); ok {
		applyErr = s.Stalled()
	}
	if s, ok := n.sm.(interface{ Alarm() error }); ok {
		alarm = s.Alarm()
	}
	rep.Halt = n.halted()
	rep.Build, rep.NewestCommand = n.cfg.Build, uint8(n.sm.NewestType())
	switch {
	case n.gate.isClosed():
		rep.Reason = "stopping"
	case rep.Halt != nil:
		rep.Reason = rep.Halt.Error()
	case alarm != nil:
		rep.Reason = alarm.Error()
	case appendErr != nil:
		rep.Reason = appendErr.Error()
	case applyErr != nil:
		rep.Reason = "cannot apply committed entries: " + Pathless(applyErr)
	case id == "":
		rep.Reason = "no known leader"
	case string(id) == n.cfg.NodeID && !n.leaderReady():
		rep.Reason = "new leader is applying the entries of earlier terms"
	case string(id) != n.cfg.NodeID && !n.caughtUpSinceStart(applied):
		rep.Reason = fmt.Sprintf("catching up with the leader since this node started (applied %d, the leader had committed %d)",
			applied, n.catchUp.Load())
	case string(id) != n.cfg.NodeID && rep.LeaderCommitIndex > applied+n.cfg.MaxLag:
		rep.Reason = fmt.Sprintf("%d entries behind the leader (applied %d, the leader committed %d)",
			rep.LeaderCommitIndex-applied, applied, rep.LeaderCommitIndex)
	case applied < n.stateIndex(commit):
		rep.Reason = "applying committed entries"
	default:
		rep.Ready = true
		rep.AppliedIndex = max(applied, commit)
		n.startCaughtUp.Store(true)
	}
	return rep.Ready, rep
}

// caughtUpSinceStart reports whether this follower has applied, since it started, every
// entry the leader had committed when it first heard from it. Until then it is not
// ready, however few entries it misses: a restarted node that answered reads (or told a
// rolling restart to move on) while replaying would serve an old state. Afterwards the
// MaxLag allowance applies, so a follower a little behind under load stays ready.
func (n *Node) caughtUpSinceStart(applied uint64) bool {
	if n.startCaughtUp.Load() {
		return true
	}
	lc := n.commit.idx.Load()
	if lc == 0 {
		return false // no leader has sent its commit index yet
	}
	n.catchUp.CompareAndSwap(0, lc)
	if applied < n.stateIndex(n.catchUp.Load()) {
		return false
	}
	n.startCaughtUp.Store(true)
	return true
}

// stateIndex returns the index the state machine must have applied for its state to
// reflect every entry up to commit. Raft never hands no-op and barrier entries to the
// state machine, so a commit index that points at one would never be reached; entries
// below the log's first index were compacted into a snapshot the state already contains.
// The scan stops at the first entry the state machine sees; runs of state-less entries
// are short (one no-op per term, one barrier per leadership), and a run longer than
// maxStatelessScan is treated as if its last entry carried state.
func (n *Node) stateIndex(commit uint64) uint64 {
	applied := n.sm.AppliedIndex()
	if commit <= applied {
		return commit
	}
	first, err := n.logs.FirstIndex()
	if err != nil {
		return commit
	}
	var l raft.Log
	for idx := commit; idx > applied && idx >= first; idx-- {
		if commit-idx >= maxStatelessScan {
			return commit
		}
		if err := n.logs.GetLog(idx, &l); err != nil {
			return idx
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return idx
		}
	}
	return applied
}

const maxStatelessScan = 1024
