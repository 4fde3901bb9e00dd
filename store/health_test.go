package store

import (
	"errors"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestSetHealth_AppliesTransitionsAndSkipsSameState(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(2, in))
	n, err := s.SetHealth(3, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 2, Healthy: false}})
	if err != nil || n != 1 {
		t.Fatalf("SetHealth = %d, %v; want 1", n, err)
	}
	got := mustInstance(t, s, in.Ref())
	if got.Healthy || got.ModifyIndex != 3 || got.CreateIndex != 2 {
		t.Fatalf("after flip %+v", got)
	}
	before := mustDump(t, s)
	n, err = s.SetHealth(4, []model.HealthUpdate{
		{Ref: in.Ref(), Epoch: 2, Healthy: false},               // already in that state
		{Ref: testInstance("127.100.0.9", 80).Ref(), Epoch: 2},  // gone
		{Ref: model.InstanceRef{Namespace: "bad ns"}, Epoch: 2}, // malformed
	})
	if err != nil || n != 0 {
		t.Fatalf("SetHealth = %d, %v; want 0", n, err)
	}
	assertUnchanged(t, s, before)
}

func TestSetHealth_EpochFencesReRegistration(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(10, in))
	mustDo(t, s.DeregisterInstance(11, in.Ref()))
	mustDo(t, s.RegisterInstance(12, in))
	before := mustDump(t, s)
	// The prober saw the first registration (epoch 10) fail.
	n, err := s.SetHealth(13, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 10, Healthy: false}})
	if err != nil || n != 0 {
		t.Fatalf("stale-epoch SetHealth = %d, %v; want 0", n, err)
	}
	assertUnchanged(t, s, before)
	if n, _ := s.SetHealth(14, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 12, Healthy: false}}); n != 1 {
		t.Fatalf("current-epoch SetHealth applied %d, want 1", n)
	}
}

func TestSetHealth_SkipsUnprobedClusters(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertCluster(1, model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		Name: model.DefaultCluster, HealthCheck: model.HealthCheck{Type: model.CheckNone}}))
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(2, in))
	if n, _ := s.SetHealth(3, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 2, Healthy: false}}); n != 0 {
		t.Fatalf("SetHealth on a NONE cluster applied %d, want 0", n)
	}
}

func TestSetHealthManual_OnlyOnUnprobedClusters(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	if err := s.SetHealthManual(1, in.Ref(), false); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	mustDo(t, s.RegisterInstance(2, in))
	before := mustDump(t, s)
	if err := s.SetHealthManual(3, in.Ref(), false); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("probed cluster: %v, want ErrConflict", err)
	}
	assertUnchanged(t, s, before)

	mustDo(t, s.UpsertCluster(4, model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		Name: model.DefaultCluster, HealthCheck: model.HealthCheck{Type: model.CheckNone}}))
	mustDo(t, s.SetHealthManual(5, in.Ref(), false))
	got := mustInstance(t, s, in.Ref())
	if got.Healthy || got.ModifyIndex != 5 {
		t.Fatalf("after manual health %+v", got)
	}
	before = mustDump(t, s)
	mustDo(t, s.SetHealthManual(6, in.Ref(), false))
	assertUnchanged(t, s, before)
	assertField(t, s.SetHealthManual(7, model.InstanceRef{Namespace: "dev", Group: "g1", Service: "orders", IP: "", Port: 80}, true), "ip")
}
