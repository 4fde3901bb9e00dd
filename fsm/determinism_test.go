package fsm

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// A log whose outcome depends on limits: a registration with 2 KB of metadata (over the
// default 1 KiB setting, under the compiled-in ceiling), a settings change, one with
// metadata over the ceiling (refused everywhere), and conditional writes.
func determinismLog(t *testing.T) []*raft.Log {
	big := testInstance("127.100.0.1", 80)
	big.Metadata = map[string]string{"blob": strings.Repeat("x", 2048)}
	huge := testInstance("127.100.0.2", 80)
	huge.Metadata = map[string]string{"blob": strings.Repeat("x", model.HardMaxMetadataBytes)}
	cas := func(idx uint64, onService bool, c Conditional) CASRequest {
		r, err := NewCAS(idx, onService, c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return []*raft.Log{
		cmdLog(t, 1, RegisterInstanceType, RegisterInstanceRequest{Instance: big}),
		cmdLog(t, 2, UpdateSettingsType, UpdateSettingsRequest{Settings: model.Settings{MetadataMaxBytes: 512}}),
		cmdLog(t, 3, RegisterInstanceType, RegisterInstanceRequest{Instance: huge}),
		cmdLog(t, 4, CASType, cas(0, false, RegisterInstanceRequest{Instance: testInstance("127.100.0.3", 80)})),
		cmdLog(t, 5, CASType, cas(0, false, RegisterInstanceRequest{Instance: testInstance("127.100.0.3", 80)})),
		cmdLog(t, 6, CASType, cas(1, false, DeregisterInstanceRequest{Ref: big.Ref()})),
	}
}

// The same log applied by FSMs over stores opened with different node options gives
// byte-identical state: nothing that Apply does depends on a node's configuration.
func TestApply_SameLogSameStateWhateverTheNodeConfig(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts := []store.Options{
		{NoSync: true},
		{SyncInterval: time.Hour},
		{Logger: logger},
	}
	var hashes []string
	var states []store.State
	for i, o := range opts {
		s, err := store.Open(filepath.Join(t.TempDir(), "state.db"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f := New(s, nil)
		logs := determinismLog(t)
		res := results(t, logs, f.ApplyBatch(logs))
		if i == 0 {
			if res[0].Err != nil {
				t.Fatalf("2 KB of metadata refused by the state machine: %v (only admission applies the settings)", res[0].Err)
			}
			if !errors.Is(res[2].Err, model.ErrInvalid) {
				t.Fatalf("metadata over the ceiling: %v, want ErrInvalid", res[2].Err)
			}
			if res[3].Err != nil || !errors.Is(res[4].Err, model.ErrCASMismatch) {
				t.Fatalf("create-if-absent twice: %v, %v; want nil, cas mismatch", res[3].Err, res[4].Err)
			}
			// The 2 KB instance was registered at index 1: cas=1 matches.
			if res[5].Err != nil {
				t.Fatalf("cas=1 delete of an instance at modify index 1: %v", res[5].Err)
			}
		}
		st, err := s.Dump()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
		hashes = append(hashes, st.Hash())
	}
	for i := 1; i < len(hashes); i++ {
		if hashes[i] != hashes[0] {
			t.Fatalf("replica %d state %s differs from replica 0 %s:\n%+v\n%+v", i, hashes[i], hashes[0], states[i], states[0])
		}
	}
	st := states[0]
	if st.Settings.MetadataMaxBytes != 512 || st.Settings.ModifyIndex != 2 {
		t.Fatalf("settings %+v", st.Settings)
	}
	if len(st.Instances) != 1 || st.Instances[0].IP != "127.100.0.3" {
		t.Fatalf("instances %+v: want only the conditional registration (the 2 KB one was deleted by cas=1)", st.Instances)
	}
}

func TestCAS_ConditionsOnTheObjectOrItsService(t *testing.T) {
	f := mustNewFSM(t)
	in := testInstance("127.100.0.1", 80)
	mustApply := func(idx uint64, mt MessageType, msg any) error {
		t.Helper()
		return results(t, []*raft.Log{cmdLog(t, idx, mt, msg)}, f.ApplyBatch([]*raft.Log{cmdLog(t, idx, mt, msg)}))[0].Err
	}
	if err := mustApply(10, RegisterInstanceType, RegisterInstanceRequest{Instance: in}); err != nil {
		t.Fatal(err)
	}
	before, err := f.Store().Dump()
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := NewCAS(9, false, UpdateInstanceRequest{Ref: in.Ref(), Patch: model.InstancePatch{Weight: new(5.0)}})
	err = mustApply(11, CASType, stale)
	var ce *model.CASError
	if !errors.As(err, &ce) || ce.Current != 10 || ce.Expected != 9 || !errors.Is(err, model.ErrCASMismatch) {
		t.Fatalf("stale update: %v", err)
	}
	after, _ := f.Store().Dump()
	after.AppliedIndex = before.AppliedIndex
	if after.Hash() != before.Hash() {
		t.Fatal("a refused conditional write changed the state")
	}
	// On the service: the service's index is raised by the instance's registration.
	svcStale, _ := NewCAS(1, true, UpsertClusterRequest{Cluster: model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group,
		Service: testKey.Service, Name: "web", HealthCheck: model.DefaultHealthCheck()}})
	if err := mustApply(12, CASType, svcStale); !errors.Is(err, model.ErrCASMismatch) {
		t.Fatalf("cluster conditional on a stale service index: %v", err)
	}
	svcNow, _ := NewCAS(10, true, UpsertClusterRequest{Cluster: model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group,
		Service: testKey.Service, Name: "web", HealthCheck: model.DefaultHealthCheck()}})
	if err := mustApply(13, CASType, svcNow); err != nil {
		t.Fatalf("cluster conditional on the current service index: %v", err)
	}
	// A conditional create of a service whose service was deleted does not recreate it.
	gone := model.ServiceKey{Namespace: "dev", Group: "g1", Service: "never"}
	upd, _ := NewCAS(7, false, UpsertServiceRequest{Service: model.Service{Namespace: gone.Namespace, Group: gone.Group, Name: gone.Service}})
	if err := mustApply(14, CASType, upd); !errors.As(err, &ce) || ce.Current != 0 {
		t.Fatalf("update of a missing service: %v", err)
	}
	if _, _, err := f.Store().Clusters(nil, gone); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("service created by a refused conditional update: %v", err)
	}
	// Only writes of one object can be conditional.
	bad := CASRequest{Index: 0, Type: SetHealthType, Payload: []byte{0x80}}
	if err := mustApply(15, CASType, bad); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("conditional SetHealth: %v", err)
	}
}
