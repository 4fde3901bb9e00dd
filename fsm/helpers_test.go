package fsm

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// mustNewStore opens a store in a fresh temporary directory (NoSync) and closes it at cleanup.
func mustNewStore(t testing.TB) *store.Store {
	t.Helper()
	return mustOpenStore(t, filepath.Join(t.TempDir(), "state.db"))
}

func mustOpenStore(t testing.TB, path string) *store.Store {
	t.Helper()
	s, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustNewFSM(t testing.TB) *FSM {
	t.Helper()
	return New(mustNewStore(t), nil)
}

// cmdLog builds a command entry as Raft would hand it to the FSM.
func cmdLog(t testing.TB, idx uint64, mt MessageType, msg any) *raft.Log {
	t.Helper()
	data, err := encodeRaw(mt, msg)
	if err != nil {
		t.Fatalf("encodeRaw(%s): %v", mt, err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
}

func configLog(idx uint64) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogConfiguration, Data: []byte{0}}
}

var testKey = model.ServiceKey{Namespace: "dev", Group: "g1", Service: "orders"}

func testInstance(ip string, port int) model.Instance {
	return model.Instance{
		Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		IP: ip, Port: port, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
	}
}

// results asserts that every result is a *Result and returns them.
func results(t testing.TB, logs []*raft.Log, out []interface{}) []*Result {
	t.Helper()
	if len(out) != len(logs) {
		t.Fatalf("%d results for %d entries", len(out), len(logs))
	}
	rs := make([]*Result, len(out))
	for i, r := range out {
		res, ok := r.(*Result)
		if !ok {
			t.Fatalf("result %d is %T, want *Result", i, r)
		}
		if res.Index != logs[i].Index {
			t.Fatalf("result %d has index %d, want %d", i, res.Index, logs[i].Index)
		}
		rs[i] = res
	}
	return rs
}

// applyOK applies logs as one batch and fails on any result error.
func applyOK(t testing.TB, f *FSM, logs ...*raft.Log) {
	t.Helper()
	for i, r := range results(t, logs, f.ApplyBatch(logs)) {
		if r.Err != nil {
			t.Fatalf("entry %d (index %d): %v", i, logs[i].Index, r.Err)
		}
	}
}

func mustDump(t testing.TB, s *store.Store) store.State {
	t.Helper()
	st, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// mustPanic runs fn and fails unless it panics.
func mustPanic(t testing.TB, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	fn()
}

// encodeRaw encodes msg under type byte t, whatever the pairing: for tests of entries
// that Encode cannot produce (ignorable flags, unknown types, mismatched payloads).
func encodeRaw(t MessageType, msg any) ([]byte, error) { return newMsgCodec().encode(t, msg) }
