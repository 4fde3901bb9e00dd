package store

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestTxn_FailedOperationLeavesTransactionUnchanged(t *testing.T) {
	s := mustNewStore(t)
	a, b := testInstance("127.100.0.1", 80), testInstance("127.100.0.2", 80)
	mustDo(t, s.Update(func(tx *Txn) error {
		if err := tx.RegisterInstance(5, a); err != nil {
			return err
		}
		if err := tx.DeleteService(5, testKey); !errors.Is(err, model.ErrConflict) {
			t.Errorf("DeleteService with instances: %v, want ErrConflict", err)
		}
		w := 20000.0
		if err := tx.UpdateInstance(5, a.Ref(), model.InstancePatch{Weight: &w, Cluster: new("moved")}); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("UpdateInstance with bad weight: %v, want ErrInvalid", err)
		}
		if err := tx.UpsertNamespace(5, model.Namespace{ID: "bad id"}); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("UpsertNamespace with bad id: %v, want ErrInvalid", err)
		}
		return tx.RegisterInstance(5, b)
	}))

	ref := mustNewStore(t)
	mustDo(t, ref.Update(func(tx *Txn) error {
		if err := tx.RegisterInstance(5, a); err != nil {
			return err
		}
		return tx.RegisterInstance(5, b)
	}))
	assertUnchanged(t, s, mustDump(t, ref))
}

func TestUpdate_ErrorRollsBackEverything(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	ws := NewWatchSet()
	_, _, _ = s.Service(ws, testKey)
	s.WatchAll(ws)
	events, cancel := s.Subscribe(4)
	defer cancel()

	boom := errors.New("boom")
	err := s.Update(func(tx *Txn) error {
		if err := tx.RegisterInstance(3, testInstance("127.100.0.1", 80)); err != nil {
			return err
		}
		if err := tx.SetAppliedIndex(3); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	assertUnchanged(t, s, before)
	if s.AppliedIndex() != 0 {
		t.Fatalf("AppliedIndex = %d after rollback", s.AppliedIndex())
	}
	if !notFired(ws) {
		t.Fatal("a watch fired for a rolled-back transaction")
	}
	select {
	case evs := <-events:
		t.Fatalf("events of a rolled-back transaction: %+v", evs)
	default:
	}
}

func TestUpdate_PanicRollsBack(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic did not propagate")
			}
		}()
		_ = s.Update(func(tx *Txn) error {
			_ = tx.RegisterInstance(1, testInstance("127.100.0.1", 80))
			panic("bad entry")
		})
	}()
	assertUnchanged(t, s, before)
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.1", 80)))
}

func TestTxn_AppliedIndexIsMonotonicAndDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	mustDo(t, err)
	mustDo(t, s.Update(func(tx *Txn) error {
		if tx.AppliedIndex() != 0 {
			t.Errorf("fresh AppliedIndex = %d", tx.AppliedIndex())
		}
		if err := tx.SetAppliedIndex(9); err != nil {
			return err
		}
		if tx.AppliedIndex() != 9 {
			t.Errorf("AppliedIndex in tx = %d, want 9", tx.AppliedIndex())
		}
		if err := tx.SetAppliedIndex(4); !errors.Is(err, model.ErrConflict) {
			t.Errorf("SetAppliedIndex backwards = %v, want ErrConflict", err)
		}
		return nil
	}))
	if s.AppliedIndex() != 9 {
		t.Fatalf("AppliedIndex = %d, want 9", s.AppliedIndex())
	}
	mustDo(t, s.Close())
	if s2 := mustOpenAt(t, path); s2.AppliedIndex() != 9 {
		t.Fatalf("AppliedIndex after reopen = %d, want 9", s2.AppliedIndex())
	}
}

func TestWriteOps_ValidateTheirArguments(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	before := mustDump(t, s)
	badRef := testInstance("127.100.0.1", 80).Ref()
	badRef.Group = "bad group"
	cases := map[string]struct {
		field string
		err   error
	}{
		"DeregisterInstance": {"group", s.DeregisterInstance(2, badRef)},
		"UpdateInstance":     {"group", s.UpdateInstance(2, badRef, model.InstancePatch{})},
		"SetHealthManual":    {"group", s.SetHealthManual(2, badRef, false)},
		"DeleteService":      {"namespace", s.DeleteService(2, model.ServiceKey{Namespace: "a/b", Group: "g", Service: "s"})},
		"DeleteNamespace":    {"namespace", s.DeleteNamespace(2, "")},
		"RemoveMember":       {"id", s.RemoveMember(2, "")},
	}
	for op, c := range cases {
		t.Run(op, func(t *testing.T) { assertField(t, c.err, c.field) })
	}
	assertUnchanged(t, s, before)
}
