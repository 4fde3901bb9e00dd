package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// StateSnapshot is a consistent point-in-time view of this node's state (the embedded
// store snapshot: WriteTo, Size, Counts, Close) together with the Raft log position it
// reflects. It holds a read transaction of the state file: Close it promptly.
type StateSnapshot struct {
	*store.Snapshot
	// Index is the Raft index the view reflects: every entry up to Index is in it, and
	// no entry after. It is at least the view's own applied index, so a restore of the
	// view (which moves the log past Index) never replays an entry the view contains.
	Index uint64
	// Term is the term of the entry at Index.
	Term uint64

	opened time.Time
	closed sync.Once
	timing prometheus.Observer // roster_snapshot_duration_seconds{op="save"}
}

// Close releases the view and records how long it was open (a backup archive's save).
// It is safe to call more than once.
func (s *StateSnapshot) Close() error {
	err := s.Snapshot.Close()
	s.closed.Do(func() {
		if s.timing != nil {
			s.timing.Observe(time.Since(s.opened).Seconds())
		}
	})
	return err
}

// snapshotAttempts bounds the retries of SnapshotState when a Raft snapshot compacts the
// log between reading the view and looking up its entry.
const snapshotAttempts = 5

// SnapshotState opens a view of this node's local state and determines the Raft index
// and term it reflects. It runs on any node; whether the local state is recent enough
// is the caller's decision (ConsistentRead on the leader for a fresh one).
//
// The view is a store read transaction, so its content is exact. Its position comes
// from the view's applied index (the last entry that reached the state machine) and the
// term of that entry in the log. When the view's applied index is below the last Raft
// snapshot (read before the view was opened), the state came from that snapshot or no
// entry that changes state follows it, so the snapshot's index and term describe the
// view; this also covers a state installed by Restore, whose applied index belongs to
// the log of the cluster it was saved from.
func (n *Node) SnapshotState() (*StateSnapshot, error) {
	if n.isClosed() {
		return nil, ErrShutdown
	}
	for range snapshotAttempts {
		snapIdx, snapTerm, err := n.lastSnapshot()
		if err != nil {
			return nil, err
		}
		opened := time.Now()
		sn, err := n.sm.Store().Snapshot()
		if err != nil {
			return nil, fmt.Errorf("raftnode: open state snapshot: %w", err)
		}
		applied := sn.AppliedIndex()
		out := &StateSnapshot{Snapshot: sn, opened: opened, timing: n.met.snapSave}
		if snapIdx > 0 && applied <= snapIdx {
			out.Index, out.Term = snapIdx, snapTerm
			return out, nil
		}
		var l raft.Log
		if err := n.logs.GetLog(applied, &l); err == nil {
			out.Index, out.Term = applied, l.Term
			return out, nil
		} else if !errors.Is(err, raft.ErrLogNotFound) {
			_ = sn.Close()
			return nil, fmt.Errorf("raftnode: read log entry %d: %w", applied, err)
		}
		// A snapshot taken after lastSnapshot was read compacted the entry away; the
		// next attempt sees that snapshot.
		_ = sn.Close()
	}
	return nil, fmt.Errorf("raftnode: the log kept changing while a state snapshot was taken; try again")
}

// lastSnapshot returns the index and term of the last Raft snapshot (0, 0 without one).
func (n *Node) lastSnapshot() (uint64, uint64, error) {
	stats := n.raft.Stats()
	idx, err := strconv.ParseUint(stats["last_snapshot_index"], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("raftnode: last snapshot index %q: %w", stats["last_snapshot_index"], err)
	}
	term, err := strconv.ParseUint(stats["last_snapshot_term"], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("raftnode: last snapshot term %q: %w", stats["last_snapshot_term"], err)
	}
	return idx, term, nil
}

// RestoreState replaces the state of the whole cluster with the state file read from r,
// exactly size bytes, which reflects the Raft log up to index (its applied index must
// not exceed index) at term. It runs on the leader only (ErrNotLeader elsewhere, before
// anything is read from r). The file must have been checked already (store.CheckFile
// or the snapshot archive's check): a state the state machine refuses stops the leader.
//
// This is hashicorp/raft's user restore: the leader writes r into a new Raft snapshot
// whose index is past both index and its own last index, installs it in its state
// machine (every watcher wakes; indexes stay above all indexes served before), and
// waits until a quorum has installed it too. Members that are down install it when
// they return. The current Raft configuration is kept. Afterwards the member table is
// brought back in line with the configuration: this node's record, the records the
// other servers had before the restore, and no record of a server outside the
// configuration. That write also moves the state machine's applied index past the
// restore. The index returned is the last of those writes (0 if leadership was lost
// right after the restore, which still happened).
//
// raft.Restore cannot be interrupted: ctx bounds it only through its deadline (as the
// enqueue timeout), and the caller should not cancel ctx when its client goes away.
// In-flight writes fail with ErrLeadershipLost.
//
// Before anything is read from r, index must be at most snapshot.MaxRestoreIndex, term
// at most snapshot.MaxTerm and size at most snapshot.MaxStateSize (a
// *model.ValidationError naming the argument otherwise), and the data directory must
// have room for the two copies of the state the restore writes (the Raft snapshot and
// the installed state file) beyond snapshot.DefaultMinFree (an error matching
// snapshot.ErrNoSpace otherwise). A bad index cannot be taken back: Raft makes
// max(last index, index)+1 the index of the restored snapshot and appends every later
// entry after it, so an index near 2^64 wraps the log around, and one near the
// archive format's MaxIndex leaves the cluster no room to save valid archives. The
// archive reader already refuses an index beyond MaxIndex; this is the last check
// before Raft.
func (n *Node) RestoreState(ctx context.Context, index, term uint64, r io.Reader, size int64) (uint64, error) {
	if n.isClosed() {
		return 0, ErrShutdown
	}
	if n.raft.State() != raft.Leader {
		return 0, n.notLeaderErr(nil)
	}
	if err := checkRestoreBounds(index, term, size); err != nil {
		return 0, err
	}
	// Every server installs the restored state file as this build wrote it: not while
	// a server of an older release remains.
	if err := n.requireServersApply(ctx, n.sm.NewestType()); err != nil {
		return 0, err
	}
	if err := snapshot.CheckSpace(n.cfg.DataDir, 2*size, snapshot.DefaultMinFree); err != nil {
		return 0, fmt.Errorf("raftnode: restore: %w", err)
	}
	servers, err := n.configuration(ctx)
	if err != nil {
		return 0, err
	}
	before := make(map[string]model.Member, len(servers))
	for _, s := range servers {
		if m, ok := n.member(string(s.ID)); ok {
			before[m.ID] = m
		}
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return 0, fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
		}
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index, Term: term, Size: size}
	start := time.Now()
	n.log.WarnContext(ctx, "restoring the cluster state from a snapshot", "index", index, "term", term, "bytes", size)
	if err := n.raft.Restore(meta, r, timeout); err != nil {
		return 0, fmt.Errorf("raftnode: restore: %w", n.mapRaftErr(err))
	}
	n.log.WarnContext(ctx, "cluster state restored from a snapshot", "index", index, "raft_index", n.raft.LastIndex(),
		"duration", time.Since(start))
	idx, err := n.reconcileMembers(ctx, servers, before)
	if err != nil {
		n.log.WarnContext(ctx, "member table not reconciled after the restore; members re-announce themselves", "error", err)
	}
	return idx, nil
}

// checkRestoreBounds checks the position and size of a state to restore against the
// limits of the snapshot archive, which keep Raft's index arithmetic far from overflow.
func checkRestoreBounds(index, term uint64, size int64) error {
	switch {
	case index > snapshot.MaxRestoreIndex:
		return model.Invalid("index", "a restored state's index is %d, above the limit of %d (half the archive format's "+
			"range, so that the cluster can keep writing after the restore)", index, uint64(snapshot.MaxRestoreIndex))
	case term > snapshot.MaxTerm:
		return model.Invalid("term", "a restored state's term is %d, above the limit of %d", term, uint64(snapshot.MaxTerm))
	case size < 0 || size > snapshot.MaxStateSize:
		return model.Invalid("size", "a restored state's size is %d bytes, outside 0 to %d", size, int64(snapshot.MaxStateSize))
	}
	return nil
}

// reconcileMembers makes the member table match the Raft configuration servers after a
// restore. It returns the index of the last write.
func (n *Node) reconcileMembers(ctx context.Context, servers []raft.Server, before map[string]model.Member) (uint64, error) {
	// Always written, even if unchanged: it also advances the applied index.
	idx, err := n.Apply(ctx, fsm.UpsertMemberRequest{Member: n.self()})
	if err != nil {
		return 0, err
	}
	inConfig := make(map[string]bool, len(servers))
	for _, s := range servers {
		id := string(s.ID)
		inConfig[id] = true
		m, ok := before[id]
		if id == n.cfg.NodeID || !ok {
			continue
		}
		if cur, found := n.member(id); found && cur == m {
			continue
		}
		if idx, err = n.Apply(ctx, fsm.UpsertMemberRequest{Member: m}); err != nil {
			return 0, err
		}
	}
	_, records, err := n.sm.Store().Members(nil)
	if err != nil {
		return idx, err
	}
	for _, m := range records {
		if inConfig[m.ID] {
			continue
		}
		if idx, err = n.Apply(ctx, fsm.RemoveMemberRequest{ID: m.ID}); err != nil {
			return 0, err
		}
	}
	return idx, nil
}
