package fsm

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/internal/wait"
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

// mustHalt applies logs as one batch on f and fails unless f halts at entry index for
// reason: the batch call must not return before the FSM is stopped (nothing after the
// entry may ever be applied), and it must not panic. It stops f and returns the batch's
// results.
func mustHalt(t testing.TB, f *FSM, logs []*raft.Log, index uint64, reason HaltReason) []*Result {
	t.Helper()
	done := make(chan []interface{}, 1)
	panicked := make(chan any, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				panicked <- r
			}
		}()
		done <- f.ApplyBatch(logs)
	}()
	wait.For(t, 5*time.Second, "the state machine to halt", func() bool {
		select {
		case r := <-panicked:
			t.Fatalf("ApplyBatch panicked: %v", r)
		default:
		}
		return f.Halted() != nil
	})
	h := f.Halted()
	if h.Index != index || h.Reason != reason {
		t.Fatalf("halted at %d (%s), want %d (%s): %v", h.Index, h.Reason, index, reason, h)
	}
	select {
	case <-done:
		t.Fatal("ApplyBatch returned before the state machine was stopped")
	case <-time.After(20 * time.Millisecond):
	}
	f.Stop()
	var out []interface{}
	select {
	case out = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ApplyBatch did not return after Stop")
	}
	rs := results(t, logs, out)
	for i, l := range logs {
		if l.Index >= index && !errors.Is(rs[i].Err, ErrStopped) {
			t.Fatalf("entry %d at or after the halt: result %v, want ErrStopped", l.Index, rs[i].Err)
		}
	}
	// Nothing is applied afterwards, whatever Raft hands over.
	next := []*raft.Log{cmdLog(t, logs[len(logs)-1].Index+1, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.9.9", 9)})}
	before := f.AppliedIndex()
	if r := results(t, next, f.ApplyBatch(next))[0]; !errors.Is(r.Err, ErrStopped) || f.AppliedIndex() != before {
		t.Fatalf("an entry after the halt: %v, applied index %d (was %d)", r.Err, f.AppliedIndex(), before)
	}
	return rs
}

// encodeRaw encodes msg under type byte t, whatever the pairing: for tests of entries
// that Encode cannot produce (ignorable flags, unknown types, mismatched payloads).
func encodeRaw(t MessageType, msg any) ([]byte, error) { return newMsgCodec().encode(t, msg) }
