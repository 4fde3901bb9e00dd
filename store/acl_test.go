package store

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/model"
)

func testToken(t *testing.T, mgmt bool) (acl.Token, string) {
	t.Helper()
	id, _ := acl.NewID()
	secret, _ := acl.NewID()
	return acl.Token{AccessorID: id, SecretHash: acl.HashSecret(secret), Description: "test", Management: mgmt,
		Rules: acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write}}}, secret
}

func update(t *testing.T, s *Store, fn func(tx *Txn) error) error {
	t.Helper()
	return s.Update(fn)
}

// Tokens: one bootstrap, then tokens created and deleted; each found by its secret's
// hash; ids and secrets unique; the ACL index moves with every change.
func TestACL_TokenLifecycle(t *testing.T) {
	s := mustNewStore(t)
	if st, err := s.ACLState(); err != nil || st.Bootstrapped() || st.Tokens != 0 {
		t.Fatalf("new store: %+v %v", st, err)
	}
	tok, _ := testToken(t, false)
	if err := update(t, s, func(tx *Txn) error { return tx.CreateToken(5, tok) }); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("token before the bootstrap: %v, want conflict", err)
	}
	if err := update(t, s, func(tx *Txn) error { return tx.ACLBootstrap(6, tok) }); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("bootstrap with a token that is not management: %v", err)
	}
	boot, _ := testToken(t, true)
	if err := update(t, s, func(tx *Txn) error { return tx.ACLBootstrap(7, boot) }); err != nil {
		t.Fatal(err)
	}
	other, _ := testToken(t, true)
	if err := update(t, s, func(tx *Txn) error { return tx.ACLBootstrap(8, other) }); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("second bootstrap: %v, want conflict", err)
	}
	if err := update(t, s, func(tx *Txn) error { return tx.CreateToken(9, tok) }); err != nil {
		t.Fatal(err)
	}
	dupID := tok
	dupID.SecretHash = acl.HashSecret("another")
	dupSecret, _ := testToken(t, false)
	dupSecret.SecretHash = tok.SecretHash
	for _, d := range []acl.Token{dupID, dupSecret} {
		if err := update(t, s, func(tx *Txn) error { return tx.CreateToken(10, d) }); !errors.Is(err, model.ErrConflict) {
			t.Fatalf("duplicate token: %v, want conflict", err)
		}
	}
	got, ok, err := s.TokenBySecretHash(tok.SecretHash)
	if err != nil || !ok || got.AccessorID != tok.AccessorID || got.CreateIndex != 9 {
		t.Fatalf("by hash: %+v %v %v", got, ok, err)
	}
	idx, list, err := s.Tokens(nil)
	if err != nil || len(list) != 2 || idx != 9 {
		t.Fatalf("tokens: %d %+v %v", idx, list, err)
	}
	if st, _ := s.ACLState(); st.BootstrapIndex != 7 || st.Tokens != 2 {
		t.Fatalf("state %+v", st)
	}
	if err := update(t, s, func(tx *Txn) error { return tx.DeleteToken(11, tok.AccessorID) }); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.TokenBySecretHash(tok.SecretHash); ok {
		t.Fatal("a deleted token is still found by its secret")
	}
	if idx, _, _ := s.Tokens(nil); idx != 11 {
		t.Fatalf("index after a deletion: %d, want 11", idx)
	}
	if _, _, err := s.Token(nil, tok.AccessorID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("deleted token read: %v", err)
	}
	if err := update(t, s, func(tx *Txn) error { return tx.DeleteToken(12, tok.AccessorID) }); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("second deletion: %v, want not found", err)
	}
	// The ACL state survives a reopen and is part of Dump.
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenAt(t, path)
	st, err := s.Dump()
	if err != nil || st.ACLBootstrapIndex != 7 || len(st.Tokens) != 1 || st.Tokens[0].AccessorID != boot.AccessorID {
		t.Fatalf("dump after reopen: %+v %v", st, err)
	}
}

// The state hash covers the tokens, and a state without ACLs hashes as before they
// existed (no "acl" bucket in the hash), so hashes recorded by older versions still
// match.
func TestACL_StateHash(t *testing.T) {
	s := mustNewStore(t)
	_, before, err := s.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if err := update(t, s, func(tx *Txn) error {
		_, err := tx.aclBucket(true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, empty, _ := s.StateHash()
	if empty != before {
		t.Fatal("an empty ACL bucket changed the hash of a state without tokens")
	}
	boot, _ := testToken(t, true)
	if err := update(t, s, func(tx *Txn) error { return tx.ACLBootstrap(3, boot) }); err != nil {
		t.Fatal(err)
	}
	_, with, _ := s.StateHash()
	if with == before {
		t.Fatal("a token did not change the state hash")
	}
}

// KeepACL: a state file without ACLs takes the cluster's; one with its own keeps them.
func TestACL_KeepACL(t *testing.T) {
	cluster := mustNewStore(t)
	boot, _ := testToken(t, true)
	tok, _ := testToken(t, false)
	if err := cluster.Update(func(tx *Txn) error {
		if err := tx.ACLBootstrap(4, boot); err != nil {
			return err
		}
		return tx.CreateToken(5, tok)
	}); err != nil {
		t.Fatal(err)
	}
	e, err := cluster.ExportACL()
	if err != nil || e.BootstrapIndex != 4 || e.Index != 5 || len(e.Tokens) != 2 {
		t.Fatalf("export %+v %v", e, err)
	}

	archive := mustOpenAt(t, filepath.Join(t.TempDir(), "archive.db"))
	var kept bool
	if err := archive.Update(func(tx *Txn) (err error) { kept, err = tx.KeepACL(e); return err }); err != nil || !kept {
		t.Fatalf("keep into a state without ACLs: %v %v", kept, err)
	}
	if got, ok, _ := archive.TokenBySecretHash(tok.SecretHash); !ok || got.AccessorID != tok.AccessorID {
		t.Fatal("the kept token is not found by its secret")
	}

	own := mustOpenAt(t, filepath.Join(t.TempDir(), "own.db"))
	ownBoot, _ := testToken(t, true)
	if err := own.Update(func(tx *Txn) error { return tx.ACLBootstrap(9, ownBoot) }); err != nil {
		t.Fatal(err)
	}
	if err := own.Update(func(tx *Txn) (err error) { kept, err = tx.KeepACL(e); return err }); err != nil || kept {
		t.Fatalf("keep into a state with its own ACLs: %v %v", kept, err)
	}
	if _, ok, _ := own.TokenBySecretHash(tok.SecretHash); ok {
		t.Fatal("a state with its own ACLs took the cluster's tokens")
	}
}

// Authentication reads the ACL state from memory: after every commit, rollback, reopen
// and restore, that copy answers as the file does.
func TestACL_InMemoryStateFollowsTheFile(t *testing.T) {
	s := mustNewStore(t)
	boot, _ := testToken(t, true)
	tok, _ := testToken(t, false)
	// check compares the in-memory answers with the file's for both tokens.
	check := func(what string, wantBoot uint64, wantFound ...bool) {
		t.Helper()
		for _, mem := range []bool{true, false} {
			var saved *aclCache
			if !mem {
				saved = s.acl.Swap(nil)
			}
			idx, err := s.ACLBootstrapIndex()
			if err != nil || idx != wantBoot {
				t.Errorf("%s (memory %v): bootstrap index %d %v, want %d", what, mem, idx, err, wantBoot)
			}
			for i, tk := range []acl.Token{boot, tok} {
				got, ok, err := s.TokenBySecretHash(tk.SecretHash)
				if err != nil || ok != wantFound[i] || (ok && got.AccessorID != tk.AccessorID) {
					t.Errorf("%s (memory %v): token %d found %v (%v), want %v", what, mem, i, ok, err, wantFound[i])
				}
			}
			if !mem {
				s.acl.Store(saved)
			}
		}
	}
	snapshot := func() []byte {
		t.Helper()
		sn, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sn.Close() }()
		var buf bytes.Buffer
		if _, err := sn.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	empty := snapshot()
	check("new store", 0, false, false)

	rollback := errors.New("rolled back")
	if err := s.Update(func(tx *Txn) error {
		if err := tx.ACLBootstrap(3, boot); err != nil {
			return err
		}
		return rollback
	}); !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	check("after a rolled-back bootstrap", 0, false, false)

	if err := s.Update(func(tx *Txn) error { return tx.ACLBootstrap(4, boot) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Txn) error { return tx.CreateToken(5, tok) }); err != nil {
		t.Fatal(err)
	}
	check("after bootstrap and create", 4, true, true)
	both := snapshot()

	if err := s.Update(func(tx *Txn) error { return tx.DeleteToken(6, tok.AccessorID) }); err != nil {
		t.Fatal(err)
	}
	check("after delete", 4, true, false)

	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpenAt(t, path)
	check("after reopen", 4, true, false)

	if err := s.Restore(bytes.NewReader(both)); err != nil {
		t.Fatal(err)
	}
	check("after restoring a snapshot with both tokens", 4, true, true)
	if err := s.Restore(bytes.NewReader(empty)); err != nil {
		t.Fatal(err)
	}
	check("after restoring a snapshot without ACLs", 0, false, false)
}
