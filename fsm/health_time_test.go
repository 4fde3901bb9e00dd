package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

const (
	t0 = int64(1764676800000) // the leader's clock when the instance became unhealthy
	t1 = t0 + 90_000
)

func instanceOf(t *testing.T, f *FSM, ref model.InstanceRef) model.Instance {
	t.Helper()
	_, in, err := f.Store().Instance(nil, ref)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// healthTimeLog registers a probed and a NONE instance and moves their health with the
// timed commands; it returns the log and the two refs.
func healthTimeLog(t *testing.T) ([]*raft.Log, model.InstanceRef, model.InstanceRef) {
	probed := testInstance("127.0.0.1", 80)
	manual := testInstance("127.0.0.2", 80)
	manual.Cluster = "manual"
	none := model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service, Name: "manual",
		HealthCheck: model.HealthCheck{Type: model.CheckNone, Interval: model.Duration(5 * time.Second),
			Timeout: model.Duration(time.Second), Rise: 1, Fall: 1, DeregisterAfter: model.Duration(time.Minute)}}
	pr, mr := probed.Ref(), manual.Ref()
	return []*raft.Log{
		cmdLog(t, 1, RegisterInstanceType, RegisterInstanceRequest{Instance: probed}),
		cmdLog(t, 2, UpsertClusterType, UpsertClusterRequest{Cluster: none}),
		cmdLog(t, 3, RegisterInstanceType, RegisterInstanceRequest{Instance: manual}),
		cmdLog(t, 4, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: false}}, At: t0}),
		cmdLog(t, 5, SetHealthManualAtType, SetHealthManualAtRequest{Ref: mr, Healthy: false, At: t0 + 1}),
		// Unhealthy again: the time stays the one it became unhealthy at.
		cmdLog(t, 6, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: false}}, At: t1}),
		cmdLog(t, 7, SetHealthManualAtType, SetHealthManualAtRequest{Ref: mr, Healthy: false, At: t1}),
		// Re-registering keeps health and its time.
		cmdLog(t, 8, RegisterInstanceType, RegisterInstanceRequest{Instance: probed}),
	}, pr, mr
}

func TestSetHealthAt_RecordsTheCommittedTimeAndHealthyClearsIt(t *testing.T) {
	f := mustNewFSM(t)
	logs, pr, mr := healthTimeLog(t)
	applyOK(t, f, logs...)
	if in := instanceOf(t, f, pr); in.Healthy || in.UnhealthySince != t0 {
		t.Fatalf("probed instance: healthy %v since %d, want unhealthy since %d", in.Healthy, in.UnhealthySince, t0)
	}
	if in := instanceOf(t, f, mr); in.Healthy || in.UnhealthySince != t0+1 {
		t.Fatalf("manual instance: healthy %v since %d, want unhealthy since %d", in.Healthy, in.UnhealthySince, t0+1)
	}
	applyOK(t, f,
		cmdLog(t, 9, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: true}}, At: t1}),
		cmdLog(t, 10, SetHealthManualAtType, SetHealthManualAtRequest{Ref: mr, Healthy: true, At: t1}))
	for _, ref := range []model.InstanceRef{pr, mr} {
		if in := instanceOf(t, f, ref); !in.Healthy || in.UnhealthySince != 0 {
			t.Fatalf("%s: healthy %v since %d, want healthy with no time", ref.IP, in.Healthy, in.UnhealthySince)
		}
	}
	// The commands without a time (written by older leaders) record none; a timed
	// command later stamps the instance that lacks one.
	applyOK(t, f, cmdLog(t, 11, SetHealthType, SetHealthRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: false}}}))
	if in := instanceOf(t, f, pr); in.Healthy || in.UnhealthySince != 0 {
		t.Fatalf("after untimed SetHealth: healthy %v since %d", in.Healthy, in.UnhealthySince)
	}
	applyOK(t, f, cmdLog(t, 12, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: false}}, At: t1}))
	if in := instanceOf(t, f, pr); in.UnhealthySince != t1 {
		t.Fatalf("stamped: since %d, want %d", in.UnhealthySince, t1)
	}
	// A timed command without a time is refused everywhere.
	r := f.Apply(cmdLog(t, 13, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: pr, Epoch: 1, Healthy: true}}})).(*Result)
	if !errors.Is(r.Err, model.ErrInvalid) {
		t.Fatalf("SetHealthAt without At: %v", r.Err)
	}
}

// The FSM never reads a clock: the same log applied by two nodes, at different times,
// gives the same state, and so does replaying it after a restore from a snapshot.
func TestSetHealthAt_SameLogSameStateOnEveryNode(t *testing.T) {
	logs, _, _ := healthTimeLog(t)
	a, b := mustNewFSM(t), mustNewFSM(t)
	applyOK(t, a, logs...)
	for _, l := range logs { // one entry per batch on the other node
		applyOK(t, b, l)
	}
	if sa, sb := mustDump(t, a.Store()), mustDump(t, b.Store()); !reflect.DeepEqual(sa, sb) {
		t.Fatalf("states differ:\n%+v\n%+v", sa, sb)
	}
	applyOK(t, b, logs...) // a replay changes nothing
	if sa, sb := mustDump(t, a.Store()), mustDump(t, b.Store()); !reflect.DeepEqual(sa, sb) {
		t.Fatalf("states differ after a replay:\n%+v\n%+v", sa, sb)
	}
}

func TestAutoDeregister_OnlyTheInstanceTheLeaderSaw(t *testing.T) {
	f := mustNewFSM(t)
	logs, pr, _ := healthTimeLog(t)
	applyOK(t, f, logs...)
	sub, cancel := f.Store().Subscribe(16)
	defer cancel()
	idx := uint64(len(logs))
	next := func() uint64 { idx++; return idx }
	apply := func(d store.AutoDeregistration) error {
		return f.Apply(cmdLog(t, next(), AutoDeregisterType, AutoDeregisterRequest{Instance: d, At: t1})).(*Result).Err
	}
	// Another unhealthy period than the one the leader saw: refused.
	if err := apply(store.AutoDeregistration{Ref: pr, Epoch: 1, UnhealthySince: t0 - 1}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("stale unhealthySince: %v", err)
	}
	// Another registration epoch: refused.
	if err := apply(store.AutoDeregistration{Ref: pr, Epoch: 99, UnhealthySince: t0}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("other epoch: %v", err)
	}
	instanceOf(t, f, pr)
	if err := apply(store.AutoDeregistration{Ref: pr, Epoch: 1, UnhealthySince: t0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Store().Instance(nil, pr); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("instance still there: %v", err)
	}
	// The change feed sees a delete with its reason.
	var found bool
	for len(sub) > 0 {
		for _, ev := range <-sub {
			if ev.Kind == store.EventInstanceDelete && ev.Ref == pr {
				found = ev.Reason == store.ReasonAutoDeregistered
			}
		}
	}
	if !found {
		t.Fatal("no delete event with reason auto-deregistered")
	}
	// A retry of the same command changes nothing.
	if err := apply(store.AutoDeregistration{Ref: pr, Epoch: 1, UnhealthySince: t0}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("retry: %v", err)
	}
	// A healthy instance is never removed.
	applyOK(t, f, cmdLog(t, next(), RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.0.0.1", 80)}))
	if err := apply(store.AutoDeregistration{Ref: pr, Epoch: idx, UnhealthySince: 0}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("healthy instance: %v", err)
	}
}

// A node older than the new types halts at their entries and applies nothing, as it
// does at any unknown type without the ignore flag.
func TestNewCommandTypes_HaltAnOlderNode(t *testing.T) {
	for _, mt := range []MessageType{SetHealthAtType, SetHealthManualAtType, AutoDeregisterType} {
		f := newFSM(mustNewStore(t), nil, mt-1)
		mustHalt(t, f, []*raft.Log{cmdLog(t, 1, mt, CheckStateRequest{})}, 1, HaltNeedsUpgrade)
		if f.AppliedIndex() != 0 {
			t.Fatalf("%s: applied index %d", mt, f.AppliedIndex())
		}
	}
}

// A registration cannot set the time: a new instance starts without one, a replaced one
// keeps its own.
func TestRegisterInstance_IgnoresAGivenUnhealthySince(t *testing.T) {
	f := mustNewFSM(t)
	in := testInstance("127.0.0.3", 80)
	in.Healthy, in.UnhealthySince = false, 42
	applyOK(t, f, cmdLog(t, 1, RegisterInstanceType, RegisterInstanceRequest{Instance: in}))
	if got := instanceOf(t, f, in.Ref()); got.UnhealthySince != 0 || got.Healthy {
		t.Fatalf("new registration: healthy %v since %d, want unhealthy with no time", got.Healthy, got.UnhealthySince)
	}
	applyOK(t, f, cmdLog(t, 2, SetHealthAtType, SetHealthAtRequest{Updates: []model.HealthUpdate{{Ref: in.Ref(), Epoch: 1, Healthy: false}}, At: t0}))
	in.Weight = 2
	applyOK(t, f, cmdLog(t, 3, RegisterInstanceType, RegisterInstanceRequest{Instance: in}))
	if got := instanceOf(t, f, in.Ref()); got.UnhealthySince != t0 || got.Weight != 2 {
		t.Fatalf("replaced registration: since %d weight %v, want since %d weight 2", got.UnhealthySince, got.Weight, t0)
	}
}
