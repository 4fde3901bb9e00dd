package store

import (
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
