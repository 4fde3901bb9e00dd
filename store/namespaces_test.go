package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestUpsertNamespace_CreateThenReplaceKeepsCreateIndex(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertNamespace(3, model.Namespace{ID: "dev", Description: "first"}))
	_, ns, err := s.Namespace(nil, "dev")
	mustDo(t, err)
	if ns.Name != "dev" || ns.CreateIndex != 3 || ns.ModifyIndex != 3 {
		t.Fatalf("created %+v, want name dev and indexes 3/3", ns)
	}
	mustDo(t, s.UpsertNamespace(8, model.Namespace{ID: "dev", Name: "Development", Description: "second", CreateIndex: 99}))
	idx, ns, err := s.Namespace(nil, "dev")
	mustDo(t, err)
	if ns.CreateIndex != 3 || ns.ModifyIndex != 8 || ns.Name != "Development" || ns.Description != "second" {
		t.Fatalf("replaced %+v", ns)
	}
	if idx != 8 {
		t.Fatalf("read index = %d, want 8", idx)
	}
	listIdx, nss, err := s.Namespaces(nil)
	mustDo(t, err)
	if listIdx != 8 || len(nss) != 2 || nss[0].ID != "dev" || nss[1].ID != "public" {
		t.Fatalf("Namespaces = %d %+v", listIdx, nss)
	}
}

func TestUpsertNamespace_ValidationNamesFieldAndWritesNothing(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	cases := map[string]model.Namespace{
		"namespace":   {ID: "has space"},
		"name":        {ID: "ok", Name: strings.Repeat("n", model.MaxNamespaceNameLen+1)},
		"description": {ID: "ok", Description: strings.Repeat("d", model.MaxDescriptionLen+1)},
	}
	for field, ns := range cases {
		assertField(t, s.UpsertNamespace(1, ns), field)
	}
	assertUnchanged(t, s, before)
}

func TestUpsertNamespace_NoOpChangesNoIndex(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertNamespace(3, model.Namespace{ID: "dev", Name: "Dev"}))
	before := mustDump(t, s)
	ws := NewWatchSet()
	_, _, _ = s.Namespaces(ws)
	mustDo(t, s.UpsertNamespace(4, model.Namespace{ID: "dev", Name: "Dev"}))
	assertUnchanged(t, s, before)
	if !notFired(ws) {
		t.Fatal("namespace-list watch fired on a no-op")
	}
}

func TestDeleteNamespace_Rules(t *testing.T) {
	s := mustNewStore(t)
	if err := s.DeleteNamespace(1, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	if err := s.DeleteNamespace(1, model.DefaultNamespace); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("public: %v, want ErrConflict", err)
	}
	mustDo(t, s.UpsertService(2, model.Service{Namespace: "dev", Group: "g", Name: "a"}))
	if err := s.DeleteNamespace(3, "dev"); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("with services: %v, want ErrConflict", err)
	}
	mustDo(t, s.DeleteService(4, model.ServiceKey{Namespace: "dev", Group: "g", Service: "a"}))

	ws := NewWatchSet()
	_, _, _ = s.Namespaces(ws)
	mustDo(t, s.DeleteNamespace(5, "dev"))
	if !fired(ws) {
		t.Fatal("namespace-list watch did not fire on delete")
	}
	idx, _, err := s.Namespace(nil, "dev")
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if idx != 5 {
		t.Fatalf("not-found index = %d, want the namespace-list index 5", idx)
	}
	if _, _, _, err := s.Services(nil, "dev", "", 1, 0); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("Services of deleted namespace: %v", err)
	}
}
