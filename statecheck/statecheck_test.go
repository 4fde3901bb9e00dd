package statecheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st := storetest.Open(t)
	return st
}

// The record of a clean shutdown: absent, it says nothing; the same state passes; a
// state that changed at the recorded index raises the alarm; another index (rebuilt from
// the log) passes; an unreadable record is an error. Each check removes the record.
func TestVerifyShutdown(t *testing.T) {
	st := openStore(t)
	idx, sum, err := st.StateHash()
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, File), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name             string
		record           string // "" none; "record" RecordShutdown's
		alarm, erroneous bool
	}{
		{name: "none"},
		{name: "the same state", record: "record"},
		{name: "changed at the index", record: `{"appliedIndex":` + strconv.FormatUint(idx, 10) + `,"hash":"0000","at":"2026-01-01T00:00:00Z"}`, alarm: true},
		{name: "another index", record: `{"appliedIndex":` + strconv.FormatUint(idx+5, 10) + `,"hash":"0000","at":"2026-01-01T00:00:00Z"}`},
		{name: "unreadable", record: `{"appliedIndex":`, erroneous: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			switch tc.record {
			case "":
			case "record":
				if err := RecordShutdown(dir, st); err != nil {
					t.Fatal(err)
				}
				if rec, err := ReadShutdownRecord(dir); err != nil || rec.Hash != sum || rec.AppliedIndex != idx {
					t.Fatalf("the record: %+v %v", rec, err)
				}
			default:
				write(dir, tc.record)
			}
			alarm, err := VerifyShutdown(dir, st)
			if (alarm != nil) != tc.alarm || (err != nil) != tc.erroneous {
				t.Fatalf("alarm %v, error %v", alarm, err)
			}
			if _, err := os.Stat(filepath.Join(dir, File)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the record is left after the check: %v", err)
			}
		})
	}
}

// fakeNode is a voter among voters, this node being n1.
type fakeNode struct {
	members     []raftnode.Member
	leader      bool
	transferred bool
}

func (*fakeNode) Apply(context.Context, fsm.Command) (uint64, error) { return 0, nil }
func (*fakeNode) ServersApply(fsm.MessageType) bool                  { return true }
func (n *fakeNode) Members(context.Context) ([]raftnode.Member, error) {
	return n.members, nil
}
func (n *fakeNode) IsLeader() bool { return n.leader }
func (n *fakeNode) TransferLeadership(context.Context, string) error {
	n.transferred = true
	return nil
}

// A node whose hash a majority of the voters contradicts raises the alarm and, leading,
// hands leadership away; one the other voters disagree with without a majority (or that
// they agree with) keeps serving.
func TestCompare_MajorityRaisesTheAlarm(t *testing.T) {
	voters := []raftnode.Member{{ID: "n1", Voter: true}, {ID: "n2", HTTPAddr: "n2", Voter: true},
		{ID: "n3", HTTPAddr: "n3", Voter: true}, {ID: "n4", HTTPAddr: "n4"}}
	tests := []struct {
		name   string
		hashes map[string]string // by peer
		alarm  bool
	}{
		{"all agree", map[string]string{"n2": "h", "n3": "h", "n4": "x"}, false},
		{"one differs, one unknown", map[string]string{"n2": "x", "n3": ""}, false},
		{"a majority differs", map[string]string{"n2": "x", "n3": "x"}, true},
		{"the non-voter does not count", map[string]string{"n2": "x", "n3": "h", "n4": "x"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fsm.New(openStore(t), nil)
			node := &fakeNode{members: voters, leader: true}
			c := New(Config{NodeID: "n1", Node: node, FSM: f,
				PeerHash: func(_ context.Context, addr string, _ uint64) (string, error) { return tc.hashes[addr], nil }})
			c.compare(context.Background(), fsm.StateCheck{Index: 9, Hash: "h"})
			if (f.Alarm() != nil) != tc.alarm || node.transferred != tc.alarm {
				t.Fatalf("alarm %v, leadership handed away %v; want %v", f.Alarm(), node.transferred, tc.alarm)
			}
		})
	}
}
