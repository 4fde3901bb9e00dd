package fsm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// mixedBatch returns entries first..first+8 of every kind, including one refused command.
func mixedBatch(t testing.TB, first uint64) []*raft.Log {
	t.Helper()
	a, b := testInstance("127.100.0.1", 80), testInstance("127.100.0.2", 80)
	idx := first - 1
	next := func() uint64 { idx++; return idx }
	return []*raft.Log{
		cmdLog(t, next(), UpsertNamespaceType, UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev", Description: "d"}}),
		cmdLog(t, next(), RegisterInstanceType, RegisterInstanceRequest{Instance: a}),
		configLog(next()),
		cmdLog(t, next(), RegisterInstanceType, RegisterInstanceRequest{Instance: b}),
		// Refused in the middle: the default cluster is probed.
		cmdLog(t, next(), SetHealthManualType, SetHealthManualRequest{Ref: a.Ref(), Healthy: false}),
		cmdLog(t, next(), UpdateInstanceType, UpdateInstanceRequest{Ref: b.Ref(), Patch: model.InstancePatch{Weight: new(4.0)}}),
		cmdLog(t, next(), SetHealthType, SetHealthRequest{Updates: []model.HealthUpdate{{Ref: a.Ref(), Epoch: first + 1, Healthy: false}}}),
		cmdLog(t, next(), UpsertMemberType, UpsertMemberRequest{Member: model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848"}}),
		cmdLog(t, next(), DeregisterInstanceType, DeregisterInstanceRequest{Ref: b.Ref()}),
	}
}

func TestApplyBatch_MixedCommands(t *testing.T) {
	f := mustNewFSM(t)
	logs := mixedBatch(t, 1)
	rs := results(t, logs, f.ApplyBatch(logs))
	for i, r := range rs {
		if i == 4 {
			if !errors.Is(r.Err, model.ErrConflict) {
				t.Fatalf("entry 5: %v, want ErrConflict", r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.Fatalf("entry %d: %v", i+1, r.Err)
		}
	}
	if f.AppliedIndex() != 9 {
		t.Fatalf("AppliedIndex = %d, want 9", f.AppliedIndex())
	}
	s := f.Store()
	_, ins, err := s.Instances(nil, testKey)
	if err != nil || len(ins) != 1 {
		t.Fatalf("instances %+v %v", ins, err)
	}
	if a := ins[0]; a.IP != "127.100.0.1" || a.Healthy || a.CreateIndex != 2 || a.ModifyIndex != 7 {
		t.Fatalf("instance a = %+v", a)
	}
	if _, ns, err := s.Namespace(nil, "dev"); err != nil || ns.Description != "d" {
		t.Fatalf("namespace %+v %v", ns, err)
	}
	if m, ok := s.Member("n1"); !ok || m.RaftAddr != "127.0.0.1:7848" {
		t.Fatalf("member %+v %v", m, ok)
	}
	if svcIdx, _, _ := s.Service(nil, testKey); svcIdx != 9 {
		t.Fatalf("service index = %d, want 9", svcIdx)
	}
}

func TestApplyBatch_DomainErrorsAreStoreErrors(t *testing.T) {
	f := mustNewFSM(t)
	bad := testInstance("127.100.0.1", 0)
	logs := []*raft.Log{
		cmdLog(t, 1, RegisterInstanceType, RegisterInstanceRequest{Instance: bad}),
		cmdLog(t, 2, DeregisterInstanceType, DeregisterInstanceRequest{Ref: testInstance("127.100.0.1", 80).Ref()}),
		cmdLog(t, 3, DeleteNamespaceType, DeleteNamespaceRequest{ID: model.DefaultNamespace}),
		cmdLog(t, 4, RemoveMemberType, RemoveMemberRequest{ID: "ghost"}),
	}
	rs := results(t, logs, f.ApplyBatch(logs))
	var ve *model.ValidationError
	if !errors.As(rs[0].Err, &ve) || ve.Field != "port" {
		t.Fatalf("invalid register: %v", rs[0].Err)
	}
	if !errors.Is(rs[1].Err, model.ErrNotFound) || !errors.Is(rs[2].Err, model.ErrConflict) || rs[3].Err != nil {
		t.Fatalf("results %v / %v / %v", rs[1].Err, rs[2].Err, rs[3].Err)
	}
	if f.AppliedIndex() != 4 {
		t.Fatalf("AppliedIndex = %d, want 4: refused commands still count as applied", f.AppliedIndex())
	}
}

func TestApplyBatch_ReplayChangesNothing(t *testing.T) {
	f := mustNewFSM(t)
	logs := mixedBatch(t, 1)
	f.ApplyBatch(logs)
	before := mustDump(t, f.Store())
	idxBefore, _, _ := f.Store().Service(nil, testKey)

	rs := results(t, logs, f.ApplyBatch(logs))
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("replayed entry %d: %v (skipped entries report no error)", i, r.Err)
		}
	}
	if after := mustDump(t, f.Store()); !reflect.DeepEqual(before, after) {
		t.Fatalf("replay changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	if idx, _, _ := f.Store().Service(nil, testKey); idx != idxBefore {
		t.Fatalf("service index %d after replay, want %d", idx, idxBefore)
	}
	// A batch that overlaps the applied index applies only the new entries.
	more := append(logs[len(logs)-2:], cmdLog(t, 10, DeregisterInstanceType, DeregisterInstanceRequest{Ref: testInstance("127.100.0.1", 80).Ref()}))
	applyOK(t, f, more...)
	if _, ins, _ := f.Store().Instances(nil, testKey); len(ins) != 0 {
		t.Fatalf("instances after overlapping batch: %+v", ins)
	}
}

func TestApplyBatch_RestartThenReplayIsNoOp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := New(s, nil)
	logs := mixedBatch(t, 1)
	f.ApplyBatch(logs[:4])
	f.ApplyBatch(logs[4:])
	before := mustDump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpenStore(t, path)
	f2 := New(s2, nil)
	if f2.AppliedIndex() != 9 {
		t.Fatalf("AppliedIndex after restart = %d, want 9", f2.AppliedIndex())
	}
	// Raft replays from its last snapshot: every entry again, in other batch boundaries.
	for _, l := range logs {
		f2.Apply(l)
	}
	if after := mustDump(t, s2); !reflect.DeepEqual(before, after) {
		t.Fatalf("replay after restart changed the state:\nbefore %+v\nafter  %+v", before, after)
	}
	applyOK(t, f2, cmdLog(t, 10, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.3", 80)}))
	if f2.AppliedIndex() != 10 {
		t.Fatalf("AppliedIndex = %d, want 10", f2.AppliedIndex())
	}
}

func TestApplyBatch_ConfigurationAndIgnorableEntriesAdvanceAppliedIndex(t *testing.T) {
	f := mustNewFSM(t)
	before := mustDump(t, f.Store())
	future := append([]byte{byte(IgnoreUnknownFlag | 0x33)}, 0x01, 0x02)
	logs := []*raft.Log{
		configLog(1),
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: future},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte{byte(IgnoreUnknownFlag | RegisterInstanceType)}},
	}
	rs := results(t, logs[:2], f.ApplyBatch(logs[:2]))
	if rs[0].Err != nil || rs[1].Err != nil {
		t.Fatalf("results %v %v", rs[0].Err, rs[1].Err)
	}
	if f.AppliedIndex() != 2 {
		t.Fatalf("AppliedIndex = %d, want 2", f.AppliedIndex())
	}
	before.AppliedIndex = 2
	if after := mustDump(t, f.Store()); !reflect.DeepEqual(before, after) {
		t.Fatalf("skipped entries changed the state: %+v", after)
	}
	data, _ := encodeRaw(IgnoreUnknownFlag|RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.1", 80)})
	applyOK(t, f, &raft.Log{Index: 3, Type: raft.LogCommand, Data: data})
	if _, ins, _ := f.Store().Instances(nil, testKey); len(ins) != 1 {
		t.Fatalf("flagged known command not applied: %+v", ins)
	}
	// The flag does not make a known command skippable: it is applied (here, undecodable → halt).
	mustHalt(t, f, []*raft.Log{{Index: 4, Term: 1, Type: raft.LogCommand, Data: []byte{byte(IgnoreUnknownFlag | RegisterInstanceType)}}}, 4, HaltUndecodable)
}

// An entry the node cannot apply halts the state machine without a panic: the entries
// before it in the batch are applied, it and everything after it are not, ever, in this
// process (a restart on a build that applies it resumes from it: see
// TestHalt_RestartOnNewerBuildResumes).
func TestApplyBatch_EntryItCannotApplyHalts(t *testing.T) {
	good := func(idx uint64, ip string) *raft.Log {
		return cmdLog(t, idx, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance(ip, 80)})
	}
	for name, tc := range map[string]struct {
		bad    *raft.Log
		reason HaltReason
	}{
		"unknown type":                  {&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{0x33, 0x80}}, HaltNeedsUpgrade},
		"undecodable":                   {&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{byte(RegisterInstanceType), 0xc1}}, HaltUndecodable},
		"wrong shape":                   {&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{byte(DeleteNamespaceType), 0x93, 1, 2, 3}}, HaltUndecodable},
		"empty":                         {&raft.Log{Index: 2, Type: raft.LogCommand}, HaltUndecodable},
		"cas of an undecodable command": {cmdLog(t, 2, CASType, CASRequest{Type: RegisterInstanceType, Payload: []byte{0xc1}}), HaltUndecodable},
	} {
		t.Run(name, func(t *testing.T) {
			f := mustNewFSM(t)
			rs := mustHalt(t, f, []*raft.Log{good(1, "127.100.0.1"), tc.bad, good(3, "127.100.0.3")}, 2, tc.reason)
			if rs[0].Err != nil {
				t.Fatalf("the entry before the halt: %v", rs[0].Err)
			}
			if f.AppliedIndex() != 1 {
				t.Fatalf("AppliedIndex = %d, want 1 (the entry before the halt)", f.AppliedIndex())
			}
			if _, ins, _ := f.Store().Instances(nil, testKey); len(ins) != 1 || ins[0].IP != "127.100.0.1" {
				t.Fatalf("instances %+v, want only the one registered before the halt", ins)
			}
		})
	}
}

func TestApply_IsApplyBatchOfOne(t *testing.T) {
	f := mustNewFSM(t)
	l := cmdLog(t, 5, DeleteServiceType, DeleteServiceRequest{Key: testKey})
	res, ok := f.Apply(l).(*Result)
	if !ok || res.Index != 5 || !errors.Is(res.Err, model.ErrNotFound) {
		t.Fatalf("Apply = %#v", res)
	}
	if f.AppliedIndex() != 5 {
		t.Fatalf("AppliedIndex = %d", f.AppliedIndex())
	}
	if out := f.ApplyBatch(nil); len(out) != 0 {
		t.Fatalf("empty batch gave %d results", len(out))
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	failAfter         int
	closed, cancelled bool
}

func (s *memSink) Write(p []byte) (int, error) {
	if s.failAfter > 0 && s.Len()+len(p) > s.failAfter {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestFSM_SnapshotRestoreRoundTrip(t *testing.T) {
	src := mustNewFSM(t)
	src.ApplyBatch(mixedBatch(t, 1))
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Entries applied after the snapshot are not in it.
	applyOK(t, src, cmdLog(t, 10, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.9", 80)}))
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}

	want := mustDump(t, src.Store())
	dst := mustNewFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if dst.AppliedIndex() != 9 {
		t.Fatalf("restored AppliedIndex = %d, want 9", dst.AppliedIndex())
	}
	// Replaying the entry after the snapshot brings the copy level with the source.
	applyOK(t, dst, cmdLog(t, 10, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.9", 80)}))
	if got := mustDump(t, dst.Store()); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
}

func TestFSM_PersistCancelsSinkOnError(t *testing.T) {
	f := mustNewFSM(t)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{failAfter: 100}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist succeeded on a failing sink")
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("sink closed=%v cancelled=%v, want cancelled", sink.closed, sink.cancelled)
	}
}

func TestFSM_RestoreOfGarbageChangesNothing(t *testing.T) {
	f := mustNewFSM(t)
	f.ApplyBatch(mixedBatch(t, 1))
	before := mustDump(t, f.Store())
	err := f.Restore(io.NopCloser(bytes.NewReader([]byte("definitely not a snapshot"))))
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Restore = %v, want ErrCorrupt", err)
	}
	if after := mustDump(t, f.Store()); !reflect.DeepEqual(before, after) {
		t.Fatal("a failed restore changed the state")
	}
}

func TestWaitApplied_WakesOnApply(t *testing.T) {
	f := mustNewFSM(t)
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(context.Background(), 3) }()

	applyOK(t, f, cmdLog(t, 1, UpsertMemberType, UpsertMemberRequest{Member: model.Member{ID: "n1", RaftAddr: "127.0.0.1:1"}}))
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(3) returned %v at applied index 1", err)
	default:
	}
	f.ApplyBatch([]*raft.Log{configLog(2), configLog(3)})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitApplied did not return after the index was applied")
	}
	if err := f.WaitApplied(context.Background(), 2); err != nil {
		t.Fatalf("already applied: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := f.WaitApplied(ctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied past the end = %v, want DeadlineExceeded", err)
	}
}

// A storage failure stalls the apply path instead of crashing or skipping entries: the
// batch is retried until the storage recovers, Stalled says why meanwhile, and nothing
// of the batch is visible until it applies whole.
func TestApplyBatch_StorageFailureStallsThenResumes(t *testing.T) {
	s := mustNewStore(t)
	f := New(s, nil)
	f.retryMin, f.retryMax = time.Millisecond, 5*time.Millisecond
	full := errors.New("no space left on device")
	s.SetWriteFault(full)
	done := make(chan []interface{})
	go func() {
		done <- f.ApplyBatch([]*raft.Log{
			cmdLog(t, 1, UpsertMemberType, UpsertMemberRequest{Member: model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848"}}),
			cmdLog(t, 2, RemoveMemberType, RemoveMemberRequest{ID: "n9"}),
		})
	}()
	wait.For(t, 5*time.Second, "the apply path to report the failure", func() bool { return errors.Is(f.Stalled(), full) })
	select {
	case <-done:
		t.Fatal("ApplyBatch returned while its storage failed")
	default:
	}
	if f.AppliedIndex() != 0 {
		t.Fatalf("applied index %d during the failure", f.AppliedIndex())
	}
	s.SetWriteFault(nil)
	res := <-done
	if f.Stalled() != nil || f.AppliedIndex() != 2 || res[0].(*Result).Err != nil {
		t.Fatalf("after recovery: stalled %v, applied %d, result %+v", f.Stalled(), f.AppliedIndex(), res[0])
	}
	if _, ok := s.Member("n1"); !ok {
		t.Fatal("the member written after recovery is missing")
	}

	// Stopped while stalled: nothing applied, every entry answered ErrStopped.
	s.SetWriteFault(full)
	go func() {
		done <- f.ApplyBatch([]*raft.Log{cmdLog(t, 3, RemoveMemberType, RemoveMemberRequest{ID: "n1"})})
	}()
	wait.For(t, 5*time.Second, "the second stall", func() bool { return f.Stalled() != nil })
	f.Stop()
	res = <-done
	if !errors.Is(res[0].(*Result).Err, ErrStopped) || f.AppliedIndex() != 2 {
		t.Fatalf("stopped while stalled: %+v, applied %d", res[0], f.AppliedIndex())
	}
}

// A closed store (the node is shutting down) answers ErrStopped without retrying.
func TestApplyBatch_ClosedStoreStops(t *testing.T) {
	s := mustNewStore(t)
	f := New(s, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res := f.ApplyBatch([]*raft.Log{cmdLog(t, 1, RemoveMemberType, RemoveMemberRequest{ID: "n1"})})
	if !errors.Is(res[0].(*Result).Err, ErrStopped) {
		t.Fatalf("result %+v, want ErrStopped", res[0])
	}
}

// Every replica that applies a CheckState entry records the same hash for the same log,
// taken at that entry: later entries of the same batch are not in it.
func TestCheckState_SameHashForTheSameLog(t *testing.T) {
	member := func(i uint64, id string) *raft.Log {
		return cmdLog(t, i, UpsertMemberType, UpsertMemberRequest{Member: model.Member{ID: id, RaftAddr: "127.0.0.1:7848"}})
	}
	logs := []*raft.Log{member(1, "n1"), cmdLog(t, 2, CheckStateType, CheckStateRequest{}), member(3, "n2")}
	a, b := New(mustNewStore(t), nil), New(mustNewStore(t), nil)
	a.ApplyBatch(logs) // one batch
	for _, l := range logs {
		b.ApplyBatch([]*raft.Log{l}) // one entry at a time
	}
	ha, oka := a.StateCheck(2)
	hb, okb := b.StateCheck(2)
	if !oka || !okb || ha != hb {
		t.Fatalf("hashes at 2: %q %v, %q %v", ha, oka, hb, okb)
	}
	// The hash is the state at 2: a store that applied only the first two entries agrees.
	c := New(mustNewStore(t), nil)
	c.ApplyBatch(logs[:2])
	if _, hc, err := c.Store().StateHash(); err != nil || hc != ha {
		t.Fatalf("state at 2: %q (%v), check %q", hc, err, ha)
	}
	if latest, ok := a.LatestStateCheck(); !ok || latest.Index != 2 {
		t.Fatalf("latest check %+v %v", latest, ok)
	}
	select {
	case <-a.Checked():
	default:
		t.Fatal("no notification of the check")
	}
}
