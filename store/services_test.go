package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestUpsertService_CreatesNamespaceImplicitly(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertService(4, model.Service{Namespace: "dev", Group: "g", Name: "a", ProtectThreshold: 0.5}))
	_, ns, err := s.Namespace(nil, "dev")
	mustDo(t, err)
	if ns.CreateIndex != 4 || ns.Name != "dev" {
		t.Fatalf("implicit namespace %+v", ns)
	}
	svc := mustService(t, s, model.ServiceKey{Namespace: "dev", Group: "g", Service: "a"})
	if svc.CreateIndex != 4 || svc.ModifyIndex != 4 || svc.ProtectThreshold != 0.5 {
		t.Fatalf("service %+v", svc)
	}
}

func TestUpsertService_ReplaceKeepsCreateIndexAndInstances(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.1", 80)))
	mustDo(t, s.UpsertService(5, model.Service{Namespace: testKey.Namespace, Group: testKey.Group, Name: testKey.Service,
		Metadata: map[string]string{"team": "x"}, CreateIndex: 77}))
	svc := mustService(t, s, testKey)
	if svc.CreateIndex != 2 || svc.ModifyIndex != 5 || svc.Metadata["team"] != "x" {
		t.Fatalf("service %+v", svc)
	}
	if _, ins, err := s.Instances(nil, testKey); err != nil || len(ins) != 1 {
		t.Fatalf("instances after replace: %v %v", ins, err)
	}
}

func TestUpsertService_ValidationNamesFieldAndWritesNothing(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	base := model.Service{Namespace: "dev", Group: "g", Name: "a"}
	cases := map[string]func(*model.Service){
		"namespace":        func(v *model.Service) { v.Namespace = "" },
		"group":            func(v *model.Service) { v.Group = "a/b" },
		"service":          func(v *model.Service) { v.Name = "x@@y" },
		"protectThreshold": func(v *model.Service) { v.ProtectThreshold = 1.5 },
		"metadata": func(v *model.Service) {
			v.Metadata = map[string]string{"k": strings.Repeat("v", model.HardMaxMetadataBytes)}
		},
	}
	for field, mutate := range cases {
		svc := base
		mutate(&svc)
		assertField(t, s.UpsertService(1, svc), field)
	}
	assertUnchanged(t, s, before)
}

func TestUpsertService_NoOpChangesNoIndex(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertService(3, model.Service{Namespace: "dev", Group: "g", Name: "a", Metadata: map[string]string{}}))
	before := mustDump(t, s)
	ws := NewWatchSet()
	key := model.ServiceKey{Namespace: "dev", Group: "g", Service: "a"}
	_, _, _ = s.Service(ws, key)
	_, _, _, _ = s.Services(ws, "dev", "", 1, 0)
	// nil and empty metadata are the same definition.
	mustDo(t, s.UpsertService(9, model.Service{Namespace: "dev", Group: "g", Name: "a"}))
	assertUnchanged(t, s, before)
	if !notFired(ws) {
		t.Fatal("watch fired on a no-op")
	}
}

func TestDeleteService_Rules(t *testing.T) {
	s := mustNewStore(t)
	if err := s.DeleteService(1, testKey); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
	assertField(t, s.DeleteService(1, model.ServiceKey{Namespace: "dev", Group: "g"}), "service")
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(2, in))
	before := mustDump(t, s)
	if err := s.DeleteService(3, testKey); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("with instances: %v, want ErrConflict", err)
	}
	assertUnchanged(t, s, before)

	mustDo(t, s.DeregisterInstance(4, in.Ref()))
	mustDo(t, s.DeleteService(5, testKey))
	idx, _, err := s.Service(nil, testKey)
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if idx != 5 {
		t.Fatalf("not-found index = %d, want the services-list index 5", idx)
	}
	// Its clusters went with it: a new service of the same name starts empty.
	mustDo(t, s.UpsertService(6, model.Service{Namespace: testKey.Namespace, Group: testKey.Group, Name: testKey.Service}))
	if _, cs, err := s.Clusters(nil, testKey); err != nil || len(cs) != 0 {
		t.Fatalf("clusters of re-created service: %+v %v", cs, err)
	}
}

func TestServices_PagesGroupsAndIndex(t *testing.T) {
	s := mustNewStore(t)
	idx := uint64(0)
	for _, g := range []string{"b", "a"} {
		for i := range 3 {
			idx++
			mustDo(t, s.UpsertService(idx, model.Service{Namespace: "dev", Group: g, Name: fmt.Sprintf("s%d", i)}))
		}
	}
	names := func(svcs []model.Service) string {
		var out []string
		for _, v := range svcs {
			out = append(out, v.Group+"/"+v.Name)
		}
		return strings.Join(out, ",")
	}
	listIdx, all, total, err := s.Services(nil, "dev", "", 1, 0)
	mustDo(t, err)
	if total != 6 || names(all) != "a/s0,a/s1,a/s2,b/s0,b/s1,b/s2" || listIdx != 6 {
		t.Fatalf("all: idx %d total %d %s", listIdx, total, names(all))
	}
	_, page2, total, err := s.Services(nil, "dev", "", 2, 4)
	mustDo(t, err)
	if total != 6 || names(page2) != "b/s1,b/s2" {
		t.Fatalf("page 2: total %d %s", total, names(page2))
	}
	_, gb, total, err := s.Services(nil, "dev", "b", 1, 2)
	mustDo(t, err)
	if total != 3 || names(gb) != "b/s0,b/s1" {
		t.Fatalf("group b: total %d %s", total, names(gb))
	}
	_, beyond, total, err := s.Services(nil, "dev", "", 9, 4)
	mustDo(t, err)
	if total != 6 || len(beyond) != 0 {
		t.Fatalf("beyond the last page: total %d %s", total, names(beyond))
	}
	if _, _, _, err := s.Services(nil, "nope", "", 1, 0); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing namespace: %v", err)
	}
	assertField(t, func() error { _, _, _, err := s.Services(nil, "dev", "", 0, 1); return err }(), "page")

	// An instance change raises the list index: the listed services' ModifyIndex changed.
	mustDo(t, s.RegisterInstance(20, model.Instance{Namespace: "dev", Group: "a", Service: "s0", IP: "127.100.0.1", Port: 1, Cluster: "DEFAULT"}))
	if listIdx, _, _, _ = s.Services(nil, "dev", "", 1, 0); listIdx != 20 {
		t.Fatalf("list index after instance change = %d, want 20", listIdx)
	}
	// Other namespaces' lists are not affected.
	if pubIdx, _, _, _ := s.Services(nil, model.DefaultNamespace, "", 1, 0); pubIdx != 1 {
		t.Fatalf("public list index = %d, want 1", pubIdx)
	}
}

// ServiceSummaries filters by a case-insensitive part of the name before paging, and
// counts each listed service's instances: all, healthy, and the enabled ones its
// protect threshold applies to.
func TestServiceSummaries_NameFilterCountsAndProtectThreshold(t *testing.T) {
	s := mustNewStore(t)
	idx := uint64(0)
	for _, name := range []string{"Orders", "orders-db", "payments", "shipping"} {
		idx++
		mustDo(t, s.UpsertService(idx, model.Service{Namespace: "dev", Group: "g", Name: name, ProtectThreshold: 0.5}))
	}
	register := func(svc string, port int, healthy, enabled bool) {
		idx++
		mustDo(t, s.RegisterInstance(idx, model.Instance{Namespace: "dev", Group: "g", Service: svc, IP: "127.100.0.1",
			Port: port, Cluster: "DEFAULT", Weight: 1, Healthy: healthy, Enabled: enabled}))
	}
	// Orders: 3 instances, 1 healthy of 2 enabled (0.5 ≤ 0.5: protection on).
	register("Orders", 1, true, true)
	register("Orders", 2, false, true)
	register("Orders", 3, true, false)
	// payments: 2 healthy of 2 (1 > 0.5: off).
	register("payments", 1, true, true)
	register("payments", 2, true, true)

	cases := []struct {
		name       string
		filter     ServiceFilter
		page, size int
		total      int
		want       string // name:instances/healthy/enabled/enabledHealthy/protect
	}{
		{"every service", ServiceFilter{}, 1, 0, 4, "Orders:3/2/2/1/true orders-db:0/0/0/0/false payments:2/2/2/2/false shipping:0/0/0/0/false"},
		{"a part of the name, any case", ServiceFilter{Name: "ORDER"}, 1, 0, 2, "Orders:3/2/2/1/true orders-db:0/0/0/0/false"},
		{"the filter pages the matches", ServiceFilter{Name: "order"}, 2, 1, 2, "orders-db:0/0/0/0/false"},
		{"no match", ServiceFilter{Name: "zzz"}, 1, 0, 0, ""},
		{"with a group", ServiceFilter{Group: "g", Name: "pay"}, 1, 0, 1, "payments:2/2/2/2/false"},
		{"another group", ServiceFilter{Group: "h", Name: "pay"}, 1, 0, 0, ""},
	}
	for _, tc := range cases {
		_, list, total, err := s.ServiceSummaries(nil, "dev", tc.filter, tc.page, tc.size)
		mustDo(t, err)
		var got []string
		for _, v := range list {
			got = append(got, fmt.Sprintf("%s:%d/%d/%d/%d/%v", v.Service.Name, v.Instances, v.Healthy, v.Enabled, v.EnabledHealthy, v.ProtectThresholdReached()))
		}
		if total != tc.total || strings.Join(got, " ") != tc.want {
			t.Errorf("%s: total %d %q, want %d %q", tc.name, total, strings.Join(got, " "), tc.total, tc.want)
		}
	}
}
