package fsm

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

func batchLog(t *testing.T, idx uint64, cmds ...[]byte) *raft.Log {
	t.Helper()
	return cmdLog(t, idx, BatchType, BatchRequest{Commands: cmds})
}

func TestBatch_OneInvalidCommandFailsAlone(t *testing.T) {
	f := mustNewFSM(t)
	a, b := testInstance("127.100.0.1", 80), testInstance("127.100.0.2", 80)
	bad := testInstance("127.100.0.3", 80)
	bad.Weight = -1 // refused by the state's validation
	missing := model.InstanceRef{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service, IP: "127.100.0.9", Port: 1}
	l := batchLog(t, 5,
		mustEncode(RegisterInstanceRequest{Instance: a}),
		mustEncode(RegisterInstanceRequest{Instance: bad}),
		mustEncode(DeregisterInstanceRequest{Ref: missing}),
		mustEncode(RegisterInstanceRequest{Instance: b}),
	)
	res := results(t, []*raft.Log{l}, f.ApplyBatch([]*raft.Log{l}))[0]
	if res.Err != nil {
		t.Fatalf("batch entry Err = %v, want per-command results", res.Err)
	}
	if len(res.Batch) != 4 {
		t.Fatalf("%d results for 4 commands", len(res.Batch))
	}
	if res.Batch[0] != nil || res.Batch[3] != nil {
		t.Fatalf("valid commands failed: %v", res.Batch)
	}
	if !errors.Is(res.Batch[1], model.ErrInvalid) {
		t.Fatalf("invalid weight: %v, want ErrInvalid", res.Batch[1])
	}
	if !errors.Is(res.Batch[2], model.ErrNotFound) {
		t.Fatalf("deregistering a missing instance: %v, want ErrNotFound", res.Batch[2])
	}
	for _, in := range []model.Instance{a, b} {
		idx, got, err := f.Store().Instance(nil, in.Ref())
		if err != nil {
			t.Fatalf("%s not registered: %v", in.IP, err)
		}
		if idx != 5 || got.ModifyIndex != 5 {
			t.Fatalf("%s: index %d, modify index %d, want the entry's index 5", in.IP, idx, got.ModifyIndex)
		}
	}
	if _, _, err := f.Store().Instance(nil, bad.Ref()); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the refused instance exists: %v", err)
	}
	if f.AppliedIndex() != 5 {
		t.Fatalf("AppliedIndex = %d, want 5", f.AppliedIndex())
	}
}

// A batch applies its commands in order: a conditional command sees what the commands
// before it in the same entry wrote.
func TestBatch_AppliesInOrder(t *testing.T) {
	f := mustNewFSM(t)
	a := testInstance("127.100.0.1", 80)
	applyOK(t, f, cmdLog(t, 1, RegisterInstanceRequest{Instance: a}.MessageType(), RegisterInstanceRequest{Instance: a}))
	w := 7.0
	l := batchLog(t, 2,
		mustEncode(UpdateInstanceRequest{Ref: a.Ref(), Patch: model.InstancePatch{Weight: &w}}),
		// expects the index before the batch: the update above moved it to 2
		mustEncode(mustCAS(1, DeregisterInstanceRequest{Ref: a.Ref()})),
		mustEncode(mustCAS(2, UpdateInstanceRequest{Ref: a.Ref(), Patch: model.InstancePatch{Enabled: new(false)}})),
	)
	res := results(t, []*raft.Log{l}, f.ApplyBatch([]*raft.Log{l}))[0]
	if res.Batch[0] != nil || res.Batch[2] != nil {
		t.Fatalf("results %v", res.Batch)
	}
	if !errors.Is(res.Batch[1], model.ErrCASMismatch) {
		t.Fatalf("CAS on the index before the batch: %v, want a mismatch", res.Batch[1])
	}
	_, got, err := f.Store().Instance(nil, a.Ref())
	if err != nil || got.Weight != 7 || got.Enabled {
		t.Fatalf("instance %+v, %v: want weight 7 and disabled", got, err)
	}
}

func TestBatch_NestedBatchIsRefused(t *testing.T) {
	f := mustNewFSM(t)
	a := testInstance("127.100.0.1", 80)
	inner := mustEncode(BatchRequest{Commands: [][]byte{mustEncode(RegisterInstanceRequest{Instance: testInstance("127.100.0.2", 80)})}})
	l := batchLog(t, 1, mustEncode(RegisterInstanceRequest{Instance: a}), inner)
	res := results(t, []*raft.Log{l}, f.ApplyBatch([]*raft.Log{l}))[0]
	if res.Batch[0] != nil || !errors.Is(res.Batch[1], model.ErrInvalid) {
		t.Fatalf("results %v: want the nested batch refused as invalid", res.Batch)
	}
	if _, _, err := f.Store().Instance(nil, model.InstanceRef{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service, IP: "127.100.0.2", Port: 80}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the nested batch's command applied: %v", err)
	}
}

// An older node, whose command table lacks the batch type or a command inside it, halts
// at the entry before changing anything: it must never apply part of what its peers
// apply. An element marked ignorable is skipped instead.
func TestBatch_NodeThatCannotApplyItRefusesTheEntry(t *testing.T) {
	reg := mustEncode(RegisterInstanceRequest{Instance: testInstance("127.100.0.1", 80)})
	cases := map[string]struct {
		newest MessageType
		cmds   [][]byte
		reason HaltReason
	}{
		"no batch type":        {AutoDeregisterType, [][]byte{reg}, HaltNeedsUpgrade},
		"unknown element type": {NewestType, [][]byte{reg, {0x33, 0x80}}, HaltNeedsUpgrade},
		"undecodable element":  {NewestType, [][]byte{reg, {byte(RegisterInstanceType), 0xc1}}, HaltUndecodable},
		"empty element":        {NewestType, [][]byte{reg, {}}, HaltUndecodable},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFSM(mustNewStore(t), nil, tc.newest)
			before := mustDump(t, f.Store())
			mustHalt(t, f, []*raft.Log{batchLog(t, 1, tc.cmds...)}, 1, tc.reason)
			if after := mustDump(t, f.Store()); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused batch left changes: %+v", after)
			}
			if f.AppliedIndex() != 0 {
				t.Fatalf("AppliedIndex = %d after a refused batch", f.AppliedIndex())
			}
		})
	}
	t.Run("ignorable element", func(t *testing.T) {
		f := mustNewFSM(t)
		l := batchLog(t, 1, reg, []byte{byte(0x33 | IgnoreUnknownFlag), 0x80})
		res := results(t, []*raft.Log{l}, f.ApplyBatch([]*raft.Log{l}))[0]
		if res.Batch[0] != nil || res.Batch[1] != nil {
			t.Fatalf("results %v", res.Batch)
		}
		if _, _, err := f.Store().Instance(nil, testInstance("127.100.0.1", 80).Ref()); err != nil {
			t.Fatalf("the known element did not apply: %v", err)
		}
	})
}

// A batch changes the state exactly as its commands applied one entry each at the same
// index would: the encoding is a grouping, not a different operation.
func TestBatch_SameStateAsSeparateEntries(t *testing.T) {
	var cmds []Command
	for i := range 20 {
		in := testInstance("127.100.0.1", 1000+i)
		in.Metadata = map[string]string{"n": string(rune('a' + i))}
		cmds = append(cmds, RegisterInstanceRequest{Instance: in})
	}
	cmds = append(cmds, DeregisterInstanceRequest{Ref: testInstance("127.100.0.1", 1003).Ref()},
		UpsertServiceRequest{Service: model.Service{Namespace: testKey.Namespace, Group: testKey.Group, Name: testKey.Service, ProtectThreshold: 0.5}})

	batched, separate := mustNewFSM(t), mustNewFSM(t)
	var enc [][]byte
	for _, c := range cmds {
		enc = append(enc, mustEncode(c))
	}
	applyOK(t, batched, batchLog(t, 1, enc...))
	// the same commands, one after another in one transaction at index 1
	if err := separate.Store().Update(func(tx *store.Txn) error {
		for _, c := range cmds {
			if err := c.apply(separate, tx, 1); err != nil {
				return err
			}
		}
		return tx.SetAppliedIndex(1)
	}); err != nil {
		t.Fatal(err)
	}
	if a, b := mustDump(t, batched.Store()), mustDump(t, separate.Store()); !reflect.DeepEqual(a, b) {
		t.Fatalf("batched state differs from separately applied commands:\n%+v\n%+v", a, b)
	}
}
