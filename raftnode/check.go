package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// RaftCheck is what CheckRaft found in a stopped node's Raft storage.
type RaftCheck struct {
	// FirstIndex and LastIndex bound the log (0, 0: empty); Entries counts it.
	FirstIndex, LastIndex uint64
	Entries               int
	// Snapshots are the retained snapshots, newest first; the newest was read whole and
	// its checksum verified.
	Snapshots []raft.SnapshotMeta
	// Problems lists what is wrong; empty when the storage is sound.
	Problems []string
}

// raft-boltdb's layout (github.com/hashicorp/raft-boltdb/v2, bolt_store.go): entries in
// bucket "logs" under big-endian uint64 keys, the stable store in "conf".
var (
	boltLogsBucket = []byte("logs")
	boltConfBucket = []byte("conf")
)

// CheckRaft checks the Raft storage of the stopped node whose data directory is dataDir,
// without changing it: raft.db's page consistency, its buckets, that the log's indexes are
// contiguous, and the newest snapshot's checksum. A running node holds raft.db's lock:
// the error then matches ErrNodeRunning.
func CheckRaft(dataDir string) (RaftCheck, error) {
	var rc RaftCheck
	raftDir := filepath.Join(dataDir, raftDirName)
	path := filepath.Join(raftDir, raftDBName)
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true, Timeout: recoverLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return rc, fmt.Errorf("%s: %w", path, ErrNodeRunning)
	}
	if err != nil {
		return rc, err
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		for e := range tx.Check() {
			rc.Problems = append(rc.Problems, fmt.Sprintf("raft.db: %v", e))
		}
		if tx.Bucket(boltConfBucket) == nil {
			rc.Problems = append(rc.Problems, "raft.db: no stable store (bucket conf)")
		}
		logs := tx.Bucket(boltLogsBucket)
		if logs == nil {
			rc.Problems = append(rc.Problems, "raft.db: no log (bucket logs)")
			return nil
		}
		var prev uint64
		return logs.ForEach(func(k, _ []byte) error {
			if len(k) != 8 {
				rc.Problems = append(rc.Problems, fmt.Sprintf("raft.db: a log key of %d bytes", len(k)))
				return nil
			}
			idx := binary.BigEndian.Uint64(k)
			if rc.Entries == 0 {
				rc.FirstIndex = idx
			} else if idx != prev+1 {
				rc.Problems = append(rc.Problems, fmt.Sprintf("raft.db: the log jumps from index %d to %d", prev, idx))
			}
			prev, rc.LastIndex = idx, idx
			rc.Entries++
			return nil
		})
	})
	if err != nil {
		return rc, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, DefaultSnapshotRetain, newHCLogger(slog.New(slog.DiscardHandler), "raft-snapshot"))
	if err != nil {
		rc.Problems = append(rc.Problems, fmt.Sprintf("snapshots: %v", err))
		return rc, nil
	}
	metas, err := snaps.List()
	if err != nil {
		rc.Problems = append(rc.Problems, fmt.Sprintf("snapshots: %v", err))
		return rc, nil
	}
	for _, m := range metas {
		rc.Snapshots = append(rc.Snapshots, *m)
	}
	if len(metas) > 0 {
		_, r, err := snaps.Open(metas[0].ID)
		if err == nil {
			_, err = io.Copy(io.Discard, r)
			if cerr := r.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			rc.Problems = append(rc.Problems, fmt.Sprintf("snapshot %s: %v", metas[0].ID, err))
		}
	}
	if len(metas) > 0 && rc.Entries > 0 && rc.FirstIndex > metas[0].Index+1 {
		rc.Problems = append(rc.Problems, fmt.Sprintf("the log starts at %d, after the newest snapshot's index %d: entries in between are missing", rc.FirstIndex, metas[0].Index))
	}
	return rc, nil
}
