package registry

import (
	"context"
	"errors"
	"testing"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// countingRaft applies nothing and counts what it was asked to apply.
type countingRaft struct{ applied []fsm.Command }

func (r *countingRaft) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
	r.applied = append(r.applied, cmd)
	return uint64(len(r.applied)), nil
}
func (r *countingRaft) IsLeader() bool                       { return true }
func (r *countingRaft) ConsistentRead(context.Context) error { return nil }
func (r *countingRaft) LeaderRead(context.Context) error     { return nil }

type defaultSettings struct{}

func (defaultSettings) Settings(*store.WatchSet) (uint64, model.Settings, error) {
	return 1, model.DefaultSettings(), nil
}

// TestRegistry_AdmissionRulesGuardWritesNotRemovals checks the registry is where the
// admission rules apply for every API: a write that creates or replaces something the
// admission rules refuse never becomes a command, while deleting, deregistering or
// changing the health of what an older version stored under a now-refused name still
// does (the apply-time rules accept it).
func TestRegistry_AdmissionRulesGuardWritesNotRemovals(t *testing.T) {
	raft := &countingRaft{}
	r, err := New(Config{Settings: defaultSettings{}, Raft: raft})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	legacy := model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "a\u202eb"}
	ref := model.InstanceRef{Namespace: legacy.Namespace, Group: legacy.Group, Service: legacy.Service, IP: "127.100.0.1", Port: 80}
	in := model.Instance{Namespace: legacy.Namespace, Group: legacy.Group, Service: legacy.Service, IP: "127.100.0.1", Port: 80,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true}
	escape := map[string]string{"k": "\x1b[31m"}
	good := map[string]string{"k": "v"}
	hc := model.HealthCheck{Type: model.CheckHTTP, Path: "/a b"}.WithDefaults()

	refused := []struct {
		name  string
		write func() (uint64, error)
		field string
	}{
		{"register", func() (uint64, error) { return r.RegisterInstance(ctx, in, Condition{}) }, "service"},
		{"upsert service", func() (uint64, error) {
			return r.UpsertService(ctx, model.Service{Namespace: "public", Group: "..", Name: "orders"}, Condition{})
		}, "group"},
		{"upsert cluster", func() (uint64, error) {
			return r.UpsertCluster(ctx, model.Cluster{Namespace: "public", Group: "g", Service: "orders", Name: "web", HealthCheck: hc}, Condition{})
		}, "healthCheck.path"},
		{"patch metadata", func() (uint64, error) {
			return r.UpdateInstance(ctx, ref, model.InstancePatch{Metadata: &escape}, Condition{})
		}, "metadata"},
		{"namespace", func() (uint64, error) {
			return r.UpsertNamespace(ctx, model.Namespace{ID: "dev", Name: "\u202eved"})
		}, "name"},
	}
	for _, tc := range refused {
		_, err := tc.write()
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: %v, want a validation error naming %q", tc.name, err, tc.field)
		}
	}
	if len(raft.applied) != 0 {
		t.Fatalf("%d commands submitted for refused writes", len(raft.applied))
	}

	for name, write := range map[string]func() (uint64, error){
		"deregister": func() (uint64, error) { return r.DeregisterInstance(ctx, ref, Condition{}) },
		"health":     func() (uint64, error) { return r.SetInstanceHealth(ctx, ref, false) },
		"patch": func() (uint64, error) {
			return r.UpdateInstance(ctx, ref, model.InstancePatch{Metadata: &good}, Condition{})
		},
		"delete": func() (uint64, error) { return r.DeleteService(ctx, legacy, Condition{}) },
		"delete group": func() (uint64, error) {
			return r.DeleteService(ctx, model.ServiceKey{Namespace: "public", Group: "..", Service: "x"}, Condition{})
		},
	} {
		if _, err := write(); err != nil {
			t.Errorf("%s of a legacy name: %v", name, err)
		}
	}
	if len(raft.applied) != 5 {
		t.Fatalf("%d commands submitted, want the 5 removals and changes of legacy objects", len(raft.applied))
	}
}
