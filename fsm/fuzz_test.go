package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// fuzzTypes are the command types FuzzDecode exercises, indexed by the fuzzer's type byte.
var fuzzTypes = []MessageType{
	RegisterInstanceType, DeregisterInstanceType, UpdateInstanceType, UpsertServiceType,
	DeleteServiceType, UpsertClusterType, UpsertNamespaceType, DeleteNamespaceType,
	SetHealthType, SetHealthManualType, UpsertMemberType, RemoveMemberType,
}

// newPayload returns a pointer to a zero request of command type t.
func newPayload(t MessageType) any {
	switch t {
	case RegisterInstanceType:
		return &RegisterInstanceRequest{}
	case DeregisterInstanceType:
		return &DeregisterInstanceRequest{}
	case UpdateInstanceType:
		return &UpdateInstanceRequest{}
	case UpsertServiceType:
		return &UpsertServiceRequest{}
	case DeleteServiceType:
		return &DeleteServiceRequest{}
	case UpsertClusterType:
		return &UpsertClusterRequest{}
	case UpsertNamespaceType:
		return &UpsertNamespaceRequest{}
	case DeleteNamespaceType:
		return &DeleteNamespaceRequest{}
	case SetHealthType:
		return &SetHealthRequest{}
	case SetHealthManualType:
		return &SetHealthManualRequest{}
	case UpsertMemberType:
		return &UpsertMemberRequest{}
	case RemoveMemberType:
		return &RemoveMemberRequest{}
	}
	panic(fmt.Sprintf("no payload type for %s", t))
}

// fuzzSeeds returns the golden encodings of testdata/ (type byte first) and a few
// hand-made commands, each as (type index, payload).
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	var seeds [][]byte
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
		if err != nil {
			f.Fatalf("%s: %v", path, err)
		}
		seeds = append(seeds, b)
	}
	ref := testInstance("127.100.0.1", 8080).Ref()
	weight, cluster := 2.5, "blue"
	md := map[string]string{"v": "2"}
	extra := []struct {
		t   MessageType
		msg any
	}{
		{RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.2", 1)}},
		{UpdateInstanceType, UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{Weight: &weight, Cluster: &cluster, Metadata: &md}}},
		{UpsertClusterType, UpsertClusterRequest{Cluster: model.Cluster{Namespace: "dev", Group: "g1", Service: "orders", Name: "c1",
			HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Headers: map[string]string{"a": "b"}, ExpectedStatus: []int{200}}}}},
		{SetHealthType, SetHealthRequest{Updates: []model.HealthUpdate{{Ref: ref, Epoch: 3, Healthy: false}, {Ref: ref, Epoch: 9}}}},
		{DeleteServiceType, DeleteServiceRequest{Key: testKey}},
		{DeleteNamespaceType, DeleteNamespaceRequest{ID: "dev"}},
		{UpsertServiceType, UpsertServiceRequest{Service: model.Service{Namespace: "dev", Group: "g1", Name: "orders", ProtectThreshold: 0.5}}},
	}
	for _, e := range extra {
		b, err := encodeRaw(e.t, e.msg)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// typeIndex returns the position of t in fuzzTypes.
func typeIndex(t MessageType) byte {
	for i, ft := range fuzzTypes {
		if ft == t {
			return byte(i)
		}
	}
	return 0
}

// FuzzDecode checks the command decoder and the state machine on arbitrary payloads:
// Decode never panics and refuses bad input with ErrDecode; a payload it accepts
// re-encodes to bytes that decode to the same encoding again; and applying an entry
// whose payload decodes never panics, answers either success or a domain error
// (invalid, not found, conflict), and leaves a state in which every record passes the
// store's validation and hangs off existing parents, and which a snapshot reproduces.
func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(typeIndex(MessageType(seed[0])), seed[1:])
	}
	f.Add(byte(0), []byte{})
	f.Add(byte(2), []byte{0x80})
	f.Add(byte(8), []byte{0x81, 0xa7, 'U', 'p', 'd', 'a', 't', 'e', 's', 0xc0})
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		mt := fuzzTypes[int(typ)%len(fuzzTypes)]
		out := newPayload(mt)
		if err := Decode(payload, out); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Decode error %v does not wrap ErrDecode", err)
			}
			return
		}
		enc, err := encodeRaw(mt, derefPayload(out))
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", out, err)
		}
		again := newPayload(mt)
		if err := Decode(enc[1:], again); err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", mt, err)
		}
		enc2, err := encodeRaw(mt, derefPayload(again))
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding of %s is not stable: %x then %x (%v)", mt, enc, enc2, err)
		}

		fsm := fuzzFSM(t)
		data := append([]byte{byte(mt)}, payload...)
		logs := []*raft.Log{{Index: 100, Term: 2, Type: raft.LogCommand, Data: data}}
		if _, h := fsm.decodeAll(logs); h != nil {
			t.Fatalf("a payload Decode accepts halts the state machine: %v", h)
		}
		var res []interface{}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("ApplyBatch of a decodable %s panicked: %v", mt, r)
				}
			}()
			res = fsm.ApplyBatch(logs)
		}()
		r, ok := res[0].(*Result)
		if !ok || r.Index != 100 {
			t.Fatalf("result %#v", res[0])
		}
		if r.Err != nil && !isDomainError(r.Err) {
			t.Fatalf("%s refused with a non-domain error: %v", mt, r.Err)
		}
		if got := fsm.AppliedIndex(); got != 100 {
			t.Fatalf("applied index %d after the entry, want 100", got)
		}
		checkStateInvariants(t, fsm.Store())
	})
}

// derefPayload returns the value a payload pointer points to.
func derefPayload(p any) any {
	switch v := p.(type) {
	case *RegisterInstanceRequest:
		return *v
	case *DeregisterInstanceRequest:
		return *v
	case *UpdateInstanceRequest:
		return *v
	case *UpsertServiceRequest:
		return *v
	case *DeleteServiceRequest:
		return *v
	case *UpsertClusterRequest:
		return *v
	case *UpsertNamespaceRequest:
		return *v
	case *DeleteNamespaceRequest:
		return *v
	case *SetHealthRequest:
		return *v
	case *SetHealthManualRequest:
		return *v
	case *UpsertMemberRequest:
		return *v
	case *RemoveMemberRequest:
		return *v
	}
	panic(fmt.Sprintf("unknown payload %T", p))
}

// fuzzFSM returns an FSM over a fresh store holding a small baseline: the fuzzed
// entry meets existing namespaces, services, clusters, instances and members.
func fuzzFSM(t *testing.T) *FSM {
	t.Helper()
	f := mustNewFSM(t)
	weight := 3.0
	md := map[string]string{"zone": "b"}
	none := model.Cluster{Namespace: "dev", Group: "g1", Service: "orders", Name: "manual",
		HealthCheck: model.HealthCheck{Type: model.CheckNone}}
	manual := testInstance("127.100.0.9", 9)
	manual.Cluster = "manual"
	applyOK(t, f,
		cmdLog(t, 1, UpsertNamespaceType, UpsertNamespaceRequest{Namespace: model.Namespace{ID: "empty"}}),
		cmdLog(t, 2, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("127.100.0.1", 8080)}),
		cmdLog(t, 3, RegisterInstanceType, RegisterInstanceRequest{Instance: testInstance("fe80::1", 80)}),
		cmdLog(t, 4, UpsertClusterType, UpsertClusterRequest{Cluster: none}),
		cmdLog(t, 5, RegisterInstanceType, RegisterInstanceRequest{Instance: manual}),
		cmdLog(t, 6, UpdateInstanceType, UpdateInstanceRequest{Ref: testInstance("127.100.0.1", 8080).Ref(),
			Patch: model.InstancePatch{Weight: &weight, Metadata: &md}}),
		cmdLog(t, 7, UpsertServiceType, UpsertServiceRequest{Service: model.Service{Namespace: "dev", Group: "g1", Name: "idle"}}),
		cmdLog(t, 8, UpsertMemberType, UpsertMemberRequest{Member: model.Member{ID: "n1", RaftAddr: "127.100.0.1:7848", HTTPAddr: "127.100.0.1:8848"}}),
	)
	return f
}

// checkStateInvariants fails unless every record of s passes validation, every child
// has its parents (instance → cluster → service → namespace), and a snapshot of s
// restores to the same state.
func checkStateInvariants(t *testing.T, s *store.Store) {
	t.Helper()
	st := mustDump(t, s)
	limits := model.HardLimits()
	namespaces := map[string]bool{}
	for _, ns := range st.Namespaces {
		if err := model.ValidateNamespaceRecord(ns); err != nil {
			t.Fatalf("stored namespace %+v is invalid: %v", ns, err)
		}
		namespaces[ns.ID] = true
	}
	if !namespaces[model.DefaultNamespace] {
		t.Fatalf("namespace %q is gone", model.DefaultNamespace)
	}
	services := map[model.ServiceKey]bool{}
	for _, svc := range st.Services {
		if err := limits.ValidateService(svc); err != nil {
			t.Fatalf("stored service %+v is invalid: %v", svc, err)
		}
		if !namespaces[svc.Namespace] {
			t.Fatalf("service %v has no namespace", svc.Key())
		}
		services[svc.Key()] = true
	}
	clusters := map[string]bool{}
	for _, c := range st.Clusters {
		if err := limits.ValidateCluster(c); err != nil {
			t.Fatalf("stored cluster %+v is invalid: %v", c, err)
		}
		key := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
		if !services[key] {
			t.Fatalf("cluster %s of %v has no service", c.Name, key)
		}
		clusters[key.String()+"\x00"+c.Name] = true
	}
	for _, in := range st.Instances {
		if err := limits.ValidateInstance(in); err != nil {
			t.Fatalf("stored instance %+v is invalid: %v", in, err)
		}
		if !clusters[in.ServiceKey().String()+"\x00"+in.Cluster] {
			t.Fatalf("instance %s of %v has no cluster %q", in.Addr(), in.ServiceKey(), in.Cluster)
		}
		if in.CreateIndex == 0 || in.ModifyIndex < in.CreateIndex {
			t.Fatalf("instance %s has indexes create %d modify %d", in.Addr(), in.CreateIndex, in.ModifyIndex)
		}
	}
	for _, m := range st.Members {
		if err := model.ValidateMember(m); err != nil {
			t.Fatalf("stored member %+v is invalid: %v", m, err)
		}
	}

	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = sn.WriteTo(&buf)
	_ = sn.Close()
	if err != nil {
		t.Fatal(err)
	}
	copyFSM := mustNewFSM(t)
	if err := copyFSM.Store().Restore(&buf); err != nil {
		t.Fatalf("restoring a snapshot of the state: %v", err)
	}
	if got := mustDump(t, copyFSM.Store()); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", st) {
		t.Fatalf("restored snapshot differs:\n got %+v\nwant %+v", got, st)
	}
}
