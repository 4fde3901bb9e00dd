package store

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
)

func TestRegisterInstance_CreatesNamespaceServiceAndCluster(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 8080)
	in.Healthy = false
	in.CreateIndex, in.ModifyIndex = 99, 99
	mustDo(t, s.RegisterInstance(4, in))

	if _, ns, err := s.Namespace(nil, testKey.Namespace); err != nil || ns.CreateIndex != 4 {
		t.Fatalf("implicit namespace %+v %v", ns, err)
	}
	if svc := mustService(t, s, testKey); svc.CreateIndex != 4 || svc.ModifyIndex != 4 {
		t.Fatalf("implicit service %+v", svc)
	}
	_, c, err := s.Cluster(nil, testKey, model.DefaultCluster)
	mustDo(t, err)
	if !reflect.DeepEqual(c.HealthCheck, model.DefaultHealthCheck()) || c.CreateIndex != 4 {
		t.Fatalf("implicit cluster %+v", c)
	}
	got := mustInstance(t, s, in.Ref())
	if got.CreateIndex != 4 || got.ModifyIndex != 4 || got.Healthy {
		t.Fatalf("instance %+v: want indexes 4/4 and the given health (false)", got)
	}
}

func TestRegisterInstance_ReplaceKeepsCreateIndexAndHealth(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 8080)
	mustDo(t, s.RegisterInstance(2, in))
	n, err := s.SetHealth(3, []model.HealthUpdate{{Ref: in.Ref(), Epoch: 2, Healthy: false}})
	if err != nil || n != 1 {
		t.Fatalf("SetHealth = %d, %v", n, err)
	}
	in.Weight, in.Healthy = 5, true
	mustDo(t, s.RegisterInstance(6, in))
	got := mustInstance(t, s, in.Ref())
	if got.CreateIndex != 2 || got.ModifyIndex != 6 || got.Weight != 5 || got.Healthy {
		t.Fatalf("replaced %+v: want CreateIndex 2, ModifyIndex 6, weight 5, stored health false", got)
	}
}

func TestRegisterInstance_NoOpChangesNoIndex(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 8080)
	mustDo(t, s.RegisterInstance(2, in))
	before := mustDump(t, s)
	ws := NewWatchSet()
	_, _, _ = s.Instances(ws, testKey)
	events, cancel := s.Subscribe(4)
	defer cancel()

	in.Healthy = false // health is not the registration's to change
	in.ModifyIndex = 40
	mustDo(t, s.RegisterInstance(3, in))
	assertUnchanged(t, s, before)
	if !notFired(ws) {
		t.Fatal("watch fired on a no-op")
	}
	select {
	case evs := <-events:
		t.Fatalf("events for a no-op: %+v", evs)
	default:
	}
}

func TestRegisterInstance_ValidationNamesFieldAndWritesNothing(t *testing.T) {
	s := mustNewStore(t)
	before := mustDump(t, s)
	cases := map[string]func(*model.Instance){
		"namespace": func(in *model.Instance) { in.Namespace = "a b" },
		"group":     func(in *model.Instance) { in.Group = "" },
		"service":   func(in *model.Instance) { in.Service = "@x" },
		"ip":        func(in *model.Instance) { in.IP = "300.1.1.1" },
		"port":      func(in *model.Instance) { in.Port = 70000 },
		"cluster":   func(in *model.Instance) { in.Cluster = "" },
		"weight":    func(in *model.Instance) { in.Weight = -1 },
		"metadata": func(in *model.Instance) {
			in.Metadata = map[string]string{"k": strings.Repeat("v", model.HardMaxMetadataBytes)}
		},
	}
	for field, mutate := range cases {
		in := testInstance("127.100.0.1", 80)
		mutate(&in)
		assertField(t, s.RegisterInstance(1, in), field)
	}
	assertUnchanged(t, s, before)
}

// The store applies only the compiled-in ceiling, never the (admission-time) settings:
// metadata over the default 1 KiB setting is stored, metadata over the ceiling refused.
func TestStore_AppliesOnlyTheHardMetadataCeiling(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpdateSettings(1, model.Settings{MetadataMaxBytes: 16}))
	in := testInstance("127.100.0.1", 80)
	in.Metadata = map[string]string{"key": strings.Repeat("v", 2048)}
	mustDo(t, s.RegisterInstance(2, in))
	if got := mustInstance(t, s, in.Ref()); len(got.Metadata["key"]) != 2048 {
		t.Fatalf("stored metadata %d bytes", len(got.Metadata["key"]))
	}
	in.Port = 81
	in.Metadata = map[string]string{"key": strings.Repeat("v", model.HardMaxMetadataBytes)}
	assertField(t, s.RegisterInstance(3, in), "metadata")
}

func TestUpdateInstance_AppliesPatch(t *testing.T) {
	s := mustNewStore(t)
	in := testInstance("127.100.0.1", 80)
	mustDo(t, s.RegisterInstance(2, in))
	w, md := 3.0, map[string]string{"zone": "b"}
	mustDo(t, s.UpdateInstance(5, in.Ref(), model.InstancePatch{Weight: &w, Enabled: new(false), Metadata: &md, Cluster: new("canary")}))
	got := mustInstance(t, s, in.Ref())
	if got.Weight != 3 || got.Enabled || got.Metadata["zone"] != "b" || got.Metadata["version"] != "" ||
		got.Cluster != "canary" || got.CreateIndex != 2 || got.ModifyIndex != 5 || !got.Healthy {
		t.Fatalf("patched %+v", got)
	}
	if _, c, err := s.Cluster(nil, testKey, "canary"); err != nil || c.CreateIndex != 5 {
		t.Fatalf("implicit cluster %+v %v", c, err)
	}

	before := mustDump(t, s)
	assertField(t, s.UpdateInstance(6, in.Ref(), model.InstancePatch{Weight: new(10001.0)}), "weight")
	assertField(t, s.UpdateInstance(6, in.Ref(), model.InstancePatch{Cluster: new("")}), "cluster")
	mustDo(t, s.UpdateInstance(6, in.Ref(), model.InstancePatch{Weight: &w}))
	assertUnchanged(t, s, before)

	if err := s.UpdateInstance(7, testInstance("127.100.0.9", 80).Ref(), model.InstancePatch{Weight: &w}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing instance: %v", err)
	}
	assertField(t, s.UpdateInstance(7, model.InstanceRef{Namespace: "dev", Group: "g1", Service: "orders", IP: "127.100.0.1"}, model.InstancePatch{}), "port")
}

func TestDeregisterInstance_RemovesOnlyTheInstance(t *testing.T) {
	s := mustNewStore(t)
	a, b := testInstance("127.100.0.1", 80), testInstance("127.100.0.2", 80)
	mustDo(t, s.RegisterInstance(2, a))
	mustDo(t, s.RegisterInstance(3, b))
	mustDo(t, s.DeregisterInstance(4, a.Ref()))
	if _, _, err := s.Instance(nil, a.Ref()); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("deregistered instance: %v", err)
	}
	idx, ins, err := s.Instances(nil, testKey)
	mustDo(t, err)
	if idx != 4 || len(ins) != 1 || ins[0].IP != "127.100.0.2" {
		t.Fatalf("Instances = %d %+v", idx, ins)
	}
	if err := s.DeregisterInstance(5, a.Ref()); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("second deregister: %v", err)
	}
	mustDo(t, s.DeregisterInstance(6, b.Ref()))
	if _, _, err := s.Cluster(nil, testKey, model.DefaultCluster); err != nil {
		t.Fatalf("cluster gone with the last instance: %v", err)
	}
	if svc := mustService(t, s, testKey); svc.ModifyIndex != 6 {
		t.Fatalf("service ModifyIndex = %d, want 6", svc.ModifyIndex)
	}
}

func TestInstances_SortedByIPThenPort(t *testing.T) {
	s := mustNewStore(t)
	addrs := [][2]any{{"127.100.0.10", 80}, {"127.100.0.1", 9000}, {"127.100.0.1", 80}, {"127.100.0.1", 443}, {"::1", 80}, {"host.example", 1}}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for i, a := range addrs {
		mustDo(t, s.RegisterInstance(uint64(i+1), testInstance(a[0].(string), a[1].(int))))
	}
	_, ins, err := s.Instances(nil, testKey)
	mustDo(t, err)
	var got []string
	for _, in := range ins {
		got = append(got, in.Addr())
	}
	want := "127.100.0.1:80,127.100.0.1:443,127.100.0.1:9000,127.100.0.10:80,::1:80,host.example:1"
	want = strings.Replace(want, "::1:80", "[::1]:80", 1)
	if strings.Join(got, ",") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestInstance_NotFoundAndServiceView(t *testing.T) {
	s := mustNewStore(t)
	ref := testInstance("127.100.0.1", 80).Ref()
	if _, _, err := s.Instance(nil, ref); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing service: %v", err)
	}
	if _, _, err := s.ServiceView(nil, testKey); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("ServiceView of missing service: %v", err)
	}
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.2", 80)))
	if _, _, err := s.Instance(nil, ref); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing instance: %v", err)
	}
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.1", 80)))
	idx, v, err := s.ServiceView(nil, testKey)
	mustDo(t, err)
	if idx != 2 || v.Service.Name != testKey.Service || len(v.Clusters) != 1 || len(v.Instances) != 2 {
		t.Fatalf("ServiceView = %d %+v", idx, v)
	}
}
