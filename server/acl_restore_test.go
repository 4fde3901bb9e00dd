package server_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/store"
)

// plantToken returns archive with a management token of secret added to its state
// file, as someone who downloaded it could do offline.
func plantToken(t *testing.T, archive []byte, secret string) []byte {
	t.Helper()
	meta, state := archiveParts(t, archive)
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, state, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *store.Txn) error {
		return tx.CreateToken(meta.Index, acl.Token{AccessorID: "77777777-7777-4777-8777-777777777777",
			SecretHash: acl.HashSecret(secret), Description: "planted", Management: true})
	})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	// Compacted into a fresh file, as small as the original (the store's file grows on
	// open, beyond what an archive of this size may expand to).
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := bolt.Open(path+".compact", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bolt.Compact(dst, src, 0)
	_ = src.Close()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(path + ".compact")
	if err != nil {
		t.Fatal(err)
	}
	meta.Size = int64(len(planted))
	return withIndex(t, meta, planted, meta.Index)
}

// A restore never grants ACL rights its caller lacks. An operator (operator: write)
// who plants a management token in an archive and restores it gets 200, but the
// cluster keeps its own tokens: the planted one is refused on every node. Restoring an
// older archive does not revive a token deleted since. Only a caller with acl: write
// may ask for the archive's tokens (?acl=archive), and the answer says whose tokens the
// cluster has.
func TestACL_RestoreKeepsTheClustersTokens(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 120*time.Second)
	leader := c.MustLeader()
	op := c.token(ctx, t, "operator", api.ACLRules{Operator: "write"})
	revoked := c.token(ctx, t, "to be revoked", api.ACLRules{Namespaces: map[string]string{"*": "read"}})
	f := c.Followers()[0]
	waitToken(t, c, f, op.SecretID)
	operator := c.as(f, op.SecretID)

	var archive bytes.Buffer
	if _, err := operator.SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.as(leader, c.mgmt).DeleteToken(ctx, revoked.AccessorID); err != nil {
		t.Fatal(err)
	}
	const plantedSecret = "88888888-8888-4888-8888-888888888888"
	planted := plantToken(t, archive.Bytes(), plantedSecret)

	res, err := operator.RestoreSnapshotWith(ctx, bytes.NewReader(planted), client.RestoreOptions{})
	if err != nil {
		t.Fatalf("an operator's restore of a planted archive: %v", err)
	}
	if res.ACL != api.RestoreACLCluster {
		t.Fatalf("restore answer %+v, want acl %q", res, api.RestoreACLCluster)
	}
	for i := range c.Nodes {
		wait.For(t, 10*time.Second, c.Nodes[i].ID+" to apply the restore", func() bool {
			return c.Nodes[i].Server.Store().AppliedIndex() >= res.Index
		})
		for _, secret := range []string{plantedSecret, revoked.SecretID} {
			if _, err := c.as(i, secret).TokenSelf(ctx); !client.IsUnauthenticated(err) {
				t.Fatalf("%s after the restore: token %s… %v, want 401 (the cluster's tokens are kept)", c.Nodes[i].ID, secret[:8], err)
			}
		}
		if _, err := c.as(i, op.SecretID).TokenSelf(ctx); err != nil {
			t.Fatalf("%s: the operator's token after the restore: %v", c.Nodes[i].ID, err)
		}
	}

	// The archive's tokens: not for an operator, nor for a nonsense value.
	_, err = operator.RestoreSnapshotWith(ctx, bytes.NewReader(planted), client.RestoreOptions{ACL: api.RestoreACLArchive})
	if !client.IsPermissionDenied(err) || !strings.Contains(err.Error(), "acl: write") {
		t.Fatalf("?acl=archive with operator: write only: %v, want 403 naming acl: write", err)
	}
	_, err = operator.RestoreSnapshotWith(ctx, bytes.NewReader(planted), client.RestoreOptions{ACL: "mine"})
	mustRefuse(t, err, 400, "acl", `must be "cluster"`)

	// The management token may restore the archive's tokens: the revoked one is back.
	res, err = c.as(f, c.mgmt).RestoreSnapshotWith(ctx, bytes.NewReader(archive.Bytes()), client.RestoreOptions{ACL: api.RestoreACLArchive})
	if err != nil || res.ACL != api.RestoreACLArchive {
		t.Fatalf("?acl=archive with the management token: %+v %v", res, err)
	}
	for i := range c.Nodes {
		wait.For(t, 10*time.Second, c.Nodes[i].ID+" to know the archive's token", func() bool {
			_, err := c.as(i, revoked.SecretID).TokenSelf(context.Background())
			return err == nil
		})
	}
}
