package raftnode

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/store"
)

// Locations under Config.DataDir.
const (
	raftDirName   = "raft"     // the Raft log, stable store and snapshots
	raftDBName    = "raft.db"  // inside raftDirName: the log and stable store
	stateFileName = "state.db" // the state machine's bbolt file
)

// Lock waits for raft.db: a starting node waits a little for a previous process to let
// go; Recover gives up sooner, since a lock held at all means a running node.
const (
	startLockTimeout   = time.Second
	recoverLockTimeout = 500 * time.Millisecond
)

// StatePath is the state file of the node whose data directory is dataDir. The server
// opens its state store there, and Recover opens it there too.
func StatePath(dataDir string) string { return filepath.Join(dataDir, stateFileName) }

// storage is a node's Raft storage under DataDir/raft: the bolt log and stable store,
// the log cache in front of it, and the snapshot store.
type storage struct {
	bolt  *raftboltdb.BoltStore
	logs  raft.LogStore
	snaps *privateSnapshots
}

// openStorage creates DataDir/raft if needed and opens the storage in it, waiting at
// most lockTimeout for raft.db's file lock (a lock held longer fails with an error
// matching bbolt's ErrTimeout). New and Recover both open the storage here.
func openStorage(dataDir string, retain int, lockTimeout time.Duration, log *slog.Logger) (*storage, error) {
	raftDir := filepath.Join(dataDir, raftDirName)
	if err := os.MkdirAll(raftDir, datadir.DirMode); err != nil {
		return nil, fmt.Errorf("raftnode: create %s: %w", raftDir, err)
	}
	snaps, err := newPrivateSnapshots(raftDir, retain, newHCLogger(log, "raft-snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	path := filepath.Join(raftDir, raftDBName)
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: lockTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode: open %s: %w", path, err)
	}
	cache, err := raft.NewLogCache(logCacheSize, bolt)
	if err != nil {
		_ = bolt.Close()
		return nil, fmt.Errorf("raftnode: log cache: %w", err)
	}
	return &storage{bolt: bolt, logs: cache, snaps: snaps}, nil
}

// Recover rewrites the Raft configuration of a stopped node so that it consists of
// exactly peers (all voters), for disaster recovery when a quorum is lost for good: run
// it with the same peers on each surviving node (or on one node, with peers naming just
// that node), then start those nodes. It uses hashicorp/raft's RecoverCluster, which
// treats every entry in the node's log as committed, writes a snapshot of the state with
// the new configuration and compacts the log.
//
// The node's own data is kept as a normal start keeps it: the state file, which already
// holds every entry it applied, stays as it is and only later log entries are applied
// to it (with no metadata size limit, as their leader already validated them).
//
// Recover refuses to run while the node is running (its raft.db is locked): the error
// matches ErrNodeRunning. It also refuses a data directory without Raft state, and
// invalid peers (*ConfigError). A nil logger discards logs.
func Recover(dataDir string, peers []Peer, logger *slog.Logger) (err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(peers) == 0 {
		return configErr("peers", "must name at least one server")
	}
	if err := validatePeers(peers); err != nil {
		return err
	}
	raftDB := filepath.Join(dataDir, raftDirName, raftDBName)
	if _, err := os.Stat(raftDB); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raftnode: recover: no Raft state in %s (%s is missing): is the data directory right?", dataDir, raftDB)
		}
		return fmt.Errorf("raftnode: recover: %w", err)
	}

	st, err := openStorage(dataDir, DefaultSnapshotRetain, recoverLockTimeout, logger)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("%w: %s is locked by another process; stop the node first", ErrNodeRunning, raftDB)
		}
		return err
	}
	defer func() {
		if cerr := st.bolt.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("raftnode: recover: close %s: %w", raftDB, cerr)
		}
	}()

	state, err := store.Open(StatePath(dataDir), store.Options{
		Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("raftnode: recover: open state: %w", err)
	}
	defer func() {
		if cerr := state.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("raftnode: recover: close state: %w", cerr)
		}
	}()

	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
		})
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(peers[0].ID) // only validated: RecoverCluster stores no id
	rc.Logger = newHCLogger(logger, "raft")
	// The transport only encodes peer addresses into the snapshot; nothing is dialed.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(peers[0].Addr))
	defer func() { _ = trans.Close() }()

	sm := &durableFSM{FSM: fsm.New(state, logger), log: logger}
	before := state.AppliedIndex()
	err = raft.RecoverCluster(rc, sm, st.logs, st.bolt, st.snaps, trans, conf)
	sm.release()
	if err != nil {
		return fmt.Errorf("raftnode: recover: %w", err)
	}
	logger.Info("raft configuration recovered", "peers", len(peers), "applied_index_before", before,
		"applied_index", state.AppliedIndex())
	return nil
}

// durableFSM is the state machine Recover hands to RecoverCluster. Like a starting node
// (NoSnapshotRestoreOnStart), it keeps the durable state file rather than rolling it back
// to the latest Raft snapshot: the file already holds everything it applied, and the
// FSM skips log entries at or below its applied index. It also releases the snapshot
// RecoverCluster takes, which RecoverCluster itself never does (its read transaction
// would keep the state file from closing).
type durableFSM struct {
	*fsm.FSM
	log   *slog.Logger
	snaps []raft.FSMSnapshot
}

// Snapshot takes a snapshot of the state and remembers it for release.
func (d *durableFSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := d.FSM.Snapshot()
	if err == nil {
		d.snaps = append(d.snaps, sn)
	}
	return sn, err
}

// release releases every snapshot taken.
func (d *durableFSM) release() {
	for _, sn := range d.snaps {
		sn.Release()
	}
	d.snaps = nil
}

// Restore ignores the snapshot and keeps the durable state.
func (d *durableFSM) Restore(rc io.ReadCloser) error {
	d.log.Info("keeping the durable state file instead of the Raft snapshot", "applied_index", d.AppliedIndex())
	return rc.Close()
}
