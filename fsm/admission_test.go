package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
)

// TestApply_EntriesTheAdmissionRulesRefuseStillApply pins the boundary between the
// admission rules (model.Admit*, run by the registry before a command is built) and the
// apply-time rules (model.Validate*, run by the state machine). An entry an older
// version committed — a service named "..", with a bidi override or a zero-width
// character, metadata with terminal escapes or invalid UTF-8, a health check whose path
// has a space and whose header carries a control character — must still apply on a node
// whose admission refuses it, or that node's replica would diverge from the others.
func TestApply_EntriesTheAdmissionRulesRefuseStillApply(t *testing.T) {
	f := mustNewFSM(t)
	limits := model.DefaultLimits()
	inst := func(group, service string, md map[string]string) model.Instance {
		return model.Instance{Namespace: "public", Group: group, Service: service, IP: "127.100.0.1", Port: 80,
			Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true, Metadata: md}
	}
	instances := []model.Instance{
		inst("DEFAULT_GROUP", "..", nil),
		inst("DEFAULT_GROUP", ".", nil),
		inst("..", "orders", nil),
		inst("DEFAULT_GROUP", "a\u202eb", nil),
		inst("DEFAULT_GROUP", "orders\u200b", nil),
		inst("DEFAULT_GROUP", "\ufefforders", nil),
		inst("DEFAULT_GROUP", "orders", map[string]string{"k": "\x1b[31mred", "\xff": "1", "env\u200b": "a\nb"}),
	}
	svc := model.Service{Namespace: "public", Group: "DEFAULT_GROUP", Name: "a\u2066b", Metadata: map[string]string{"k": "\u202e"}}
	hc := model.HealthCheck{Type: model.CheckHTTP, Path: "/a b\u200b", Headers: map[string]string{"X-Ä": "\x1b[2J", "x-ä": "2"}}.WithDefaults()
	cluster := model.Cluster{Namespace: "public", Group: "DEFAULT_GROUP", Service: "..", Name: "web", HealthCheck: hc,
		Metadata: map[string]string{"k": "\t"}}
	ns := model.Namespace{ID: "dev", Name: "\u202eved", Description: "a\u2028b"}

	// Each object is one the admission rules refuse and the apply-time rules accept.
	for _, in := range instances {
		if limits.AdmitInstance(in) == nil || model.HardLimits().ValidateInstance(in) != nil {
			t.Fatalf("%+v: not an instance only admission refuses", in)
		}
	}
	if limits.AdmitService(svc) == nil || limits.AdmitCluster(cluster) == nil || model.AdmitNamespaceRecord(ns) == nil {
		t.Fatal("admission accepts an object of this test")
	}

	var logs []*raft.Log
	for _, in := range instances {
		logs = append(logs, cmdLog(t, uint64(len(logs)+1), RegisterInstanceType, RegisterInstanceRequest{Instance: in}))
	}
	logs = append(logs,
		cmdLog(t, uint64(len(logs)+1), UpsertServiceType, UpsertServiceRequest{Service: svc}),
		cmdLog(t, uint64(len(logs)+2), UpsertClusterType, UpsertClusterRequest{Cluster: cluster}),
		cmdLog(t, uint64(len(logs)+3), UpsertNamespaceType, UpsertNamespaceRequest{Namespace: ns}),
	)
	applyOK(t, f, logs...)

	s := f.Store()
	for _, in := range instances {
		_, got, err := s.Instance(nil, in.Ref())
		if err != nil {
			t.Fatalf("instance %+v not stored: %v", in.Ref(), err)
		}
		if len(got.Metadata) != len(in.Metadata) {
			t.Fatalf("instance %+v stored with metadata %q, want %q", in.Ref(), got.Metadata, in.Metadata)
		}
	}
	if _, got, err := s.Cluster(nil, model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: ".."}, "web"); err != nil ||
		got.HealthCheck.Path != hc.Path || len(got.HealthCheck.Headers) != 2 {
		t.Fatalf("cluster %+v, %v", got, err)
	}
	if _, _, err := s.Service(nil, svc.Key()); err != nil {
		t.Fatalf("service %v: %v", svc.Key(), err)
	}
	if _, got, err := s.Namespace(nil, "dev"); err != nil || got.Name != ns.Name {
		t.Fatalf("namespace %+v, %v", got, err)
	}
}
