package raftnode

import (
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/datadir"
)

// privateSnapshots is hashicorp/raft's FileSnapshotStore with private modes: it
// creates its directories 0755 and its files (state.bin: the whole state, MYSQL check
// passwords and token hashes included; meta.json) 0644. The snapshots directory is made
// DirMode when the store opens, so nobody else can reach into it even while a snapshot
// is written; each snapshot's directory and files are given datadir's modes as soon as
// Create made them and again once the snapshot is complete.
type privateSnapshots struct {
	*raft.FileSnapshotStore
	dir string // RAFT_DIR/snapshots
}

// snapshotTmpSuffix is the suffix FileSnapshotStore gives a snapshot's directory while
// it is written.
const snapshotTmpSuffix = ".tmp"

func newPrivateSnapshots(raftDir string, retain int, logger hclog.Logger) (*privateSnapshots, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(raftDir, retain, logger)
	if err != nil {
		return nil, err
	}
	p := &privateSnapshots{FileSnapshotStore: fs, dir: filepath.Join(raftDir, "snapshots")}
	if err := datadir.Tighten(p.dir); err != nil {
		return nil, err
	}
	return p, nil
}

// Create is FileSnapshotStore's, with the new snapshot's directory and files private.
func (p *privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := p.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	if err := datadir.Tighten(filepath.Join(p.dir, sink.ID()+snapshotTmpSuffix)); err != nil {
		_ = sink.Cancel()
		return nil, err
	}
	return &privateSink{SnapshotSink: sink, dir: p.dir}, nil
}

// privateSink tightens its snapshot's modes once it is complete.
type privateSink struct {
	raft.SnapshotSink
	dir string
}

// Close completes the snapshot (FileSnapshotSink.Close renames it into place and
// writes meta.json anew), then gives its directory and files private modes.
func (s *privateSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	return datadir.Tighten(filepath.Join(s.dir, s.ID()))
}
