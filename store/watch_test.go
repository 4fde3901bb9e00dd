package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
)

func TestWatch_ServiceFiresOnChangeOnly(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(1, in))
	other := in
	other.Service = "other"
	mustDo(t, s.RegisterInstance(2, other))

	ws := NewWatchSet()
	_, _, err := s.Instances(ws, testKey)
	mustDo(t, err)
	mustDo(t, s.RegisterInstance(3, other)) // no-op
	other.Weight = 7
	mustDo(t, s.RegisterInstance(4, other)) // another service
	if !notFired(ws) {
		t.Fatal("watch fired for a no-op or another service")
	}
	in.Weight = 2
	mustDo(t, s.RegisterInstance(5, in))
	if !fired(ws) {
		t.Fatal("watch did not fire on a change to the service")
	}
}

func TestWatch_RollbackDoesNotFire(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(1, in))
	ws := NewWatchSet()
	_, _, _ = s.Instances(ws, testKey)
	_ = s.Update(func(tx *Txn) error {
		_ = tx.DeregisterInstance(2, in.Ref())
		return errors.New("abort")
	})
	if !notFired(ws) {
		t.Fatal("watch fired for a rolled-back change")
	}
}

func TestWatch_MissingServiceFiresWhenCreated(t *testing.T) {
	s := mustNewStore(t)
	ws := NewWatchSet()
	idx, _, err := s.Service(ws, testKey)
	if !errors.Is(err, model.ErrNotFound) || idx < 1 {
		t.Fatalf("Service of missing = %d, %v", idx, err)
	}
	mustDo(t, s.RegisterInstance(9, testInstance("127.100.0.1", 80)))
	if !fired(ws) {
		t.Fatal("watch on a missing service did not fire when it was created")
	}
	if idx, _, _ := s.Service(nil, testKey); idx != 9 {
		t.Fatalf("index after creation = %d, want 9", idx)
	}
}

func TestWatch_NamespaceListAndAll(t *testing.T) {
	s := mustNewStore(t)
	nsWS, allWS := NewWatchSet(), NewWatchSet()
	_, _, _ = s.Namespaces(nsWS)
	s.WatchAll(allWS)
	mustDo(t, s.UpsertMember(1, model.Member{ID: "n1", RaftAddr: "127.0.0.1:1"}))
	if !fired(allWS) {
		t.Fatal("the everything channel did not fire")
	}
	if !notFired(nsWS) {
		t.Fatal("namespace-list watch fired for a member change")
	}
	mustDo(t, s.UpsertService(2, model.Service{Namespace: "newns", Group: "g", Name: "a"}))
	if !fired(nsWS) {
		t.Fatal("namespace-list watch did not fire for an implicit namespace")
	}
}

func TestWatch_OneChannelPerItemReleasedAfterFiring(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(1, in))
	for range 50 {
		_, _, _ = s.Instances(NewWatchSet(), testKey)
	}
	if n := s.watches.size(); n != 1 {
		t.Fatalf("%d channels for 50 readers of one service, want 1", n)
	}
	in.Weight = 3
	mustDo(t, s.RegisterInstance(2, in))
	if n := s.watches.size(); n != 0 {
		t.Fatalf("%d channels left after the change fired them, want 0", n)
	}
}

func TestWatch_ReadsOfMissingServicesDoNotPileUp(t *testing.T) {
	s := mustNewStore(t)
	for i := range 50 {
		_, _, err := s.Instances(NewWatchSet(), model.ServiceKey{Namespace: model.DefaultNamespace, Group: "g", Service: fmt.Sprintf("missing-%d", i)})
		if !errors.Is(err, model.ErrNotFound) {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		_, _, _, err := s.Services(NewWatchSet(), fmt.Sprintf("missing-%d", i), "", 1, 0)
		if !errors.Is(err, model.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if n := s.watches.size(); n != 2 {
		t.Fatalf("%d channels after reading 50 missing services and namespaces, want 2 (the two lists)", n)
	}
}

func TestWatchRegistry_ReadRacingACommitWakesAtOnce(t *testing.T) {
	w := newWatchRegistry()
	seq := w.sequence() // a read begins
	w.fire(map[string]struct{}{"other": {}})
	ws := NewWatchSet()
	w.add(ws, seq, []string{"item"}) // the read registers after the commit fired
	if !fired(ws) {
		t.Fatal("a read that raced a commit was not woken")
	}
}

func TestWatchSet_WaitReturnsFalseOnContextDone(t *testing.T) {
	s := mustNewStore(t)
	ws := NewWatchSet()
	_, _, _ = s.Namespaces(ws)
	_, _, _ = s.Members(ws)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ws.Wait(ctx) {
		t.Fatal("Wait returned true without a change")
	}
	if NewWatchSet().Wait(ctx) {
		t.Fatal("empty set returned true")
	}
}

func TestWatch_CloseWakesWatchers(t *testing.T) {
	s := mustNewStore(t)
	ws := NewWatchSet()
	_, _, _ = s.Namespaces(ws)
	mustDo(t, s.Close())
	if !fired(ws) {
		t.Fatal("Close did not wake watchers")
	}
}
