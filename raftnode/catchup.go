package raftnode

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/store"
)

// catchUpFromSnapshot runs before Raft starts on a node with existing state. Raft starts
// with NoSnapshotRestoreOnStart, trusting the state file to hold everything up to its
// applied index, and replays only entries after its latest snapshot. The state file can
// be behind that snapshot: its commits are fsynced on an interval, so a machine crash
// may lose the last ones, and a torn file is replaced by an empty one at open. Entries
// covered by the snapshot may already be compacted out of the log, so the state is
// restored from the snapshot first; the log then replays the rest.
func (n *Node) catchUpFromSnapshot(snaps *raft.FileSnapshotStore, raftDir string) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("raftnode: list snapshots: %w", err)
	}
	if len(list) == 0 {
		return nil // the whole log is still there: replay rebuilds everything
	}
	latest := list[0]
	have := n.sm.AppliedIndex()
	// The snapshot's own applied index can be below its Raft index (entries the FSM
	// never sees, such as no-ops, advance the latter); read it from the snapshot's
	// state file, and fall back to the Raft index when it cannot be read.
	need := latest.Index
	if idx, err := store.FileAppliedIndex(filepath.Join(raftDir, "snapshots", latest.ID, "state.bin")); err == nil {
		need = idx
	}
	if have >= need {
		return nil
	}
	n.log.Warn("state is behind the latest snapshot; restoring the snapshot before replaying the log",
		"state_applied_index", have, "snapshot_index", latest.Index, "snapshot_applied_index", need, "snapshot", latest.ID)
	_, rc, err := snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("raftnode: open snapshot %s: %w", latest.ID, err)
	}
	defer rc.Close()
	if err := n.sm.Restore(rc); err != nil {
		return fmt.Errorf("raftnode: restore snapshot %s into the state: %w", latest.ID, err)
	}
	return nil
}
