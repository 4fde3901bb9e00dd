package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestMembers_UpsertRemoveAndIndex(t *testing.T) {
	s := mustNewStore(t)
	ws := NewWatchSet()
	idx, ms, err := s.Members(ws)
	mustDo(t, err)
	if idx != 1 || len(ms) != 0 {
		t.Fatalf("empty Members = %d %+v", idx, ms)
	}
	n2 := model.Member{ID: "n2", RaftAddr: "127.0.0.1:7849", HTTPAddr: "127.0.0.1:8849"}
	n1 := model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848"}
	mustDo(t, s.UpsertMember(3, n2))
	if !fired(ws) {
		t.Fatal("member watch did not fire")
	}
	mustDo(t, s.UpsertMember(4, n1))
	idx, ms, err = s.Members(nil)
	mustDo(t, err)
	if idx != 4 || len(ms) != 2 || ms[0] != n1 || ms[1] != n2 {
		t.Fatalf("Members = %d %+v", idx, ms)
	}
	if m, ok := s.Member("n2"); !ok || m != n2 {
		t.Fatalf("Member(n2) = %+v %v", m, ok)
	}

	before := mustDump(t, s)
	ws = NewWatchSet()
	_, _, _ = s.Members(ws)
	mustDo(t, s.UpsertMember(5, n2))      // no-op
	mustDo(t, s.RemoveMember(5, "ghost")) // unknown: no-op
	assertUnchanged(t, s, before)
	if !notFired(ws) {
		t.Fatal("member watch fired on a no-op")
	}

	assertField(t, s.UpsertMember(6, model.Member{RaftAddr: "127.0.0.1:1"}), "id")
	assertField(t, s.UpsertMember(6, model.Member{ID: "n3", RaftAddr: "nohostport"}), "raftAddr")
	assertField(t, s.UpsertMember(6, model.Member{ID: "n3", RaftAddr: "127.0.0.1:1", HTTPAddr: "x"}), "httpAddr")
	assertUnchanged(t, s, before)

	mustDo(t, s.RemoveMember(7, "n2"))
	if _, ok := s.Member("n2"); ok {
		t.Fatal("removed member still there")
	}
	if idx, _, _ = s.Members(nil); idx != 7 {
		t.Fatalf("member index = %d, want 7", idx)
	}
}

func TestClusterID_SetOnceAndAdopt(t *testing.T) {
	s := mustNewStore(t)
	if id, err := s.ClusterID(); err != nil || id != "" {
		t.Fatalf("a new state has id %q (%v)", id, err)
	}
	set := func(id string) error { return s.Update(func(tx *Txn) error { return tx.SetClusterID(id) }) }
	if err := set("a1b2"); err != nil {
		t.Fatal(err)
	}
	if err := set("a1b2"); err != nil {
		t.Fatalf("setting the same id again: %v", err)
	}
	if err := set("c3d4"); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("replacing the id: %v, want a conflict", err)
	}
	for _, bad := range []string{"", "-x", "a b", strings.Repeat("a", 65)} {
		if err := set(bad); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("id %q: %v, want invalid", bad, err)
		}
	}
	if err := s.UpsertMember(5, model.Member{ID: "old", RaftAddr: "127.0.0.9:7848", HTTPAddr: "127.0.0.9:8848"}); err != nil {
		t.Fatal(err)
	}
	mine := []model.Member{{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"}}
	if err := s.Update(func(tx *Txn) error { return tx.AdoptIdentity("e5f6", mine) }); err != nil {
		t.Fatal(err)
	}
	st, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if st.ClusterID != "e5f6" || len(st.Members) != 1 || st.Members[0] != mine[0] {
		t.Fatalf("after adopting: id %q, members %+v", st.ClusterID, st.Members)
	}
}

// The state hash covers the replicated content: the same writes give the same hash on
// two stores, a different value changes it, and a node-local field (the index floor)
// does not.
func TestStateHash(t *testing.T) {
	a, b := mustNewStore(t), mustNewStore(t)
	write := func(s *Store, addr string) {
		if err := s.Update(func(tx *Txn) error {
			if err := tx.UpsertMember(3, model.Member{ID: "n1", RaftAddr: addr}); err != nil {
				return err
			}
			return tx.SetAppliedIndex(3)
		}); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "127.0.0.1:7848")
	write(b, "127.0.0.1:7848")
	ia, ha, err := a.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	ib, hb, err := b.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if ia != 3 || ib != 3 || ha != hb || len(ha) != 64 {
		t.Fatalf("same writes: %d %s, %d %s", ia, ha, ib, hb)
	}
	write(b, "127.0.0.1:7849")
	if _, hb2, _ := b.StateHash(); hb2 == ha {
		t.Fatal("a changed member address left the hash unchanged")
	}
}
