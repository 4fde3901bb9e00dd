package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/statecheck"
	"github.com/rosterhq/roster/store"
)

// DataDirCheck is what CheckDataDir found in a stopped node's data directory.
type DataDirCheck struct {
	// StateApplied is the state file's applied index; StateCounts its records.
	StateApplied uint64       `json:"stateApplied"`
	StateCounts  store.Counts `json:"stateCounts"`
	// StateHash is the hash of the replicated state (the one state checks compare).
	StateHash string `json:"stateHash"`
	// ShutdownChecked says whether a clean shutdown recorded the state's hash, and so
	// whether the state file could be compared with it.
	ShutdownChecked bool `json:"shutdownChecked"`
	// ClusterID is the cluster the state belongs to.
	ClusterID string             `json:"clusterId"`
	Raft      raftnode.RaftCheck `json:"raft"`
	Problems  []string           `json:"problems"`
	Notes     []string           `json:"notes,omitempty"`
}

// OK reports whether nothing is wrong.
func (c DataDirCheck) OK() bool { return len(c.Problems) == 0 }

// CheckDataDir verifies the files of a stopped node without changing them: the state
// file (bbolt consistency, schema, every record), the hash recorded at the last clean
// shutdown (a state file changed since shows here), the cluster id of the directory
// against the state's, and the Raft log and snapshots. A running node holds the files'
// locks: the error then says so.
func CheckDataDir(dir string) (DataDirCheck, error) {
	var c DataDirCheck
	if st, err := os.Stat(dir); err != nil {
		return c, err
	} else if !st.IsDir() {
		return c, fmt.Errorf("%s is not a directory", dir)
	}
	statePath := raftnode.StatePath(dir)
	counts, applied, err := store.CheckFile(statePath)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return c, fmt.Errorf("%s: its state file is locked: %w", dir, raftnode.ErrNodeRunning)
	case errors.Is(err, store.ErrCorrupt):
		c.Problems = append(c.Problems, fmt.Sprintf("state file: %v", err))
	case err != nil:
		return c, fmt.Errorf("state file: %w", err)
	default:
		c.StateCounts, c.StateApplied = counts, applied
		if _, c.StateHash, err = store.HashFile(statePath); err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("state file: %v", err))
		}
		if c.ClusterID, err = store.ClusterIDOfFile(statePath); err != nil {
			c.Problems = append(c.Problems, fmt.Sprintf("state file: %v", err))
		}
	}
	rec, err := statecheck.ReadShutdownRecord(dir)
	var readErr *fs.PathError
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Notes = append(c.Notes, "no clean-shutdown record: the state file cannot be compared with the state the node last served (the node crashed, or already started since)")
	case errors.As(err, &readErr):
		return c, err
	case err != nil:
		c.Problems = append(c.Problems, err.Error())
	case c.StateHash != "":
		c.ShutdownChecked = true
		switch {
		case rec.AppliedIndex != c.StateApplied:
			c.Problems = append(c.Problems, fmt.Sprintf("state_mismatch: the clean shutdown recorded applied index %d, the state file is at %d", rec.AppliedIndex, c.StateApplied))
		case rec.Hash != c.StateHash:
			c.Problems = append(c.Problems, fmt.Sprintf("state_mismatch: the state file changed after the clean shutdown (hash %s, recorded %s)", c.StateHash, rec.Hash))
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cluster-id")); err == nil && c.ClusterID != "" {
		if got := strings.TrimSpace(string(b)); got != c.ClusterID {
			c.Problems = append(c.Problems, fmt.Sprintf("the data directory belongs to cluster %s, the state to cluster %s", got, c.ClusterID))
		}
	}
	c.Raft, err = raftnode.CheckRaft(dir)
	if err != nil {
		return c, fmt.Errorf("raft storage: %w", err)
	}
	c.Problems = append(c.Problems, c.Raft.Problems...)
	if c.Raft.Entries > 0 && c.StateApplied > c.Raft.LastIndex {
		c.Problems = append(c.Problems, fmt.Sprintf("the state file applied index %d is beyond the Raft log's last entry %d", c.StateApplied, c.Raft.LastIndex))
	}
	return c, nil
}
