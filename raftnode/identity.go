package raftnode

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// Cluster identity. The first leader of a cluster gives it a random id (a replicated
// SetClusterID command, applied once); every node also keeps the id in its data
// directory (clusterIDFile) as soon as it has applied it. Joins and address
// announcements carry the id and a leader refuses another cluster's, so that a server
// of one cluster — or one that read another cluster's addresses from a restored archive
// — can never change a second cluster's membership. A restore keeps the receiving
// cluster's id and members (AdoptIdentity).

// clusterIDFile, in the data directory, holds the id of the cluster the directory
// belongs to.
const clusterIDFile = "cluster-id"

// ClusterID returns the cluster's identity from the replicated state ("" until the
// first leader set it).
func (n *Node) ClusterID() string {
	id, err := n.sm.Store().ClusterID()
	if err != nil {
		return ""
	}
	return id
}

// knownClusterID is the identity this node claims in a join: the replicated one, or
// the one its data directory recorded.
func (n *Node) knownClusterID() string {
	if id := n.ClusterID(); id != "" {
		return id
	}
	id, _ := readClusterIDFile(n.cfg.DataDir)
	return id
}

// readClusterIDFile returns the id recorded in dataDir ("" when there is none).
func readClusterIDFile(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, clusterIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if err := model.ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("%s: %w", clusterIDFile, err)
	}
	return id, nil
}

// writeClusterIDFile records id in dataDir, durably.
func writeClusterIDFile(dataDir, id string) error {
	path := filepath.Join(dataDir, clusterIDFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, datadir.FileMode)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(id + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// newClusterID returns a random (version 4) UUID.
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ensureClusterID runs on every leadership: a cluster without an identity gets one —
// the id this node's data directory recorded (a state rebuilt from an older log keeps
// its cluster's id), else a new one — once every server applies fsm.SetClusterIDType
// (a rolling upgrade from a release without cluster ids waits for its last server).
func (n *Node) ensureClusterID(ctx context.Context) {
	wait := establishRetryMin
	waiting := false
	for n.ClusterID() == "" {
		if n.requireServersApply(ctx, fsm.SetClusterIDType) != nil {
			if !waiting {
				n.log.Info("the cluster has no identity yet; it is set once every server applies it (a rolling upgrade is under way)")
				waiting = true
			}
			if !sleepCtx(ctx, commandsCheckInterval) {
				return
			}
			continue
		}
		id, err := readClusterIDFile(n.cfg.DataDir)
		if err != nil || id == "" {
			id = newClusterID()
		}
		if _, err := n.Apply(ctx, fsm.SetClusterIDRequest{ID: id}); err == nil {
			n.log.Info("cluster identity set", "cluster_id", id)
			break
		} else if ctx.Err() != nil {
			return
		} else {
			n.log.Warn("setting the cluster identity failed; retrying", "error", err, "retry_in", wait)
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		wait = min(wait*2, establishRetryMax)
	}
	n.recordClusterID()
}

// identityInterval is how often a node checks that its data directory records the
// cluster's identity.
const identityInterval = time.Second

// runIdentity keeps the data directory's record of the cluster identity.
func (n *Node) runIdentity() {
	defer n.wg.Done()
	for sleepCtx(n.ctx, identityInterval) {
		n.recordClusterID()
	}
}

// recordClusterID writes the replicated identity into the data directory when it is
// not there yet, and says so loudly when the directory records another one.
func (n *Node) recordClusterID() {
	id := n.ClusterID()
	if id == "" {
		return
	}
	have, err := readClusterIDFile(n.cfg.DataDir)
	switch {
	case err != nil:
		n.log.Error("the data directory's cluster id cannot be read", "error", err)
	case have == "":
		if err := writeClusterIDFile(n.cfg.DataDir, id); err != nil {
			n.log.Error("recording the cluster id in the data directory failed", "error", err)
			return
		}
		n.log.Info("cluster id recorded in the data directory", "cluster_id", id)
	case have != id:
		if n.idMismatch.CompareAndSwap(false, true) {
			n.log.Error("this data directory belongs to another cluster than the replicated state says",
				"data_dir_cluster_id", have, "state_cluster_id", id)
		}
	}
}

// AdoptIdentity rewrites the state file at path, about to be restored, so that it
// carries this cluster's id and its current member table instead of whatever the
// archive held: a restore never changes a cluster's membership, and no node ever dials
// an address it read from an archive (another cluster's, perhaps, which would then take
// this cluster's announcements for its own).
//
// The file's ACL state becomes the cluster's current one (store.Txn.ReplaceACL) unless
// archiveACL is set — the caller may manage ACLs and asked for the archive's — so that
// a restore never grants ACL rights its caller lacks: no token planted in an archive,
// no revoked token revived. With archiveACL, an archive without ACLs restored into a
// cluster that has them still keeps this cluster's tokens (store.Txn.KeepACL).
// usedArchive reports whether the restored ACL state is the archive's. Leader only, like
// the restore.
func (n *Node) AdoptIdentity(path string, archiveACL bool) (usedArchive bool, err error) {
	if n.raft.State() != raft.Leader {
		return false, n.notLeaderErr(nil)
	}
	_, members, err := n.sm.Store().Members(nil)
	if err != nil {
		return false, err
	}
	acls, err := n.sm.Store().ExportACL()
	if err != nil {
		return false, err
	}
	st, err := store.Open(path, store.Options{Logger: n.log})
	if err != nil {
		return false, err
	}
	err = st.Update(func(tx *store.Txn) error {
		if err := tx.AdoptIdentity(n.ClusterID(), members); err != nil {
			return err
		}
		if !archiveACL {
			return tx.ReplaceACL(acls)
		}
		kept, err := tx.KeepACL(acls)
		if kept {
			n.log.Warn("the archive has no ACL tokens: the restore keeps this cluster's")
		}
		usedArchive = !kept
		return err
	})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return usedArchive, err
}
