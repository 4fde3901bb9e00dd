package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// This file checks the read cache against reads of the file: random sequences of every
// kind of write, applied through the FSM as Raft entries (alone, several in one
// transaction, several in one coalesced entry), with snapshot restores, interleaved with cached reads of views and of
// encoded responses. Every cached read must equal a read of the file that bypasses the
// cache, every view the cache holds after a write must be the current one (the commit
// drops what it changes, not only the next lookup), and the watch set of every cached
// read must have fired once the view it returned is no longer current.

var (
	cacheKeys = []model.ServiceKey{
		{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: "orders"},
		{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: "pay"},
		{Namespace: "dev", Group: "g1", Service: "orders"},
	}
	cacheIPs      = []string{"127.100.0.1", "127.100.0.2", "::1"}
	cachePorts    = []int{80, 8080}
	cacheClusters = []string{model.DefaultCluster, "blue"}
	// cacheVariants name the encodings of testEncode.
	cacheVariants = []string{"all", "healthy", "unhealthy", "blue"}
)

// testEncode encodes a view as variant, the way a handler would encode a filtered list.
func testEncode(variant string) func(uint64, store.ServiceView) ([]byte, error) {
	return func(idx uint64, v store.ServiceView) ([]byte, error) {
		var list []model.Instance
		for _, in := range v.Instances {
			switch {
			case variant == "healthy" && !in.Healthy,
				variant == "unhealthy" && in.Healthy,
				variant == "blue" && in.Cluster != "blue":
				continue
			}
			list = append(list, in)
		}
		return json.Marshal(struct {
			Index     uint64
			Service   model.Service
			Clusters  []model.Cluster
			Instances []model.Instance
		}{idx, v.Service, v.Clusters, list})
	}
}

// watched is a cached read whose watch set must fire once its result is stale.
type watched struct {
	key  model.ServiceKey
	ws   *store.WatchSet
	idx  uint64
	view store.ServiceView
	err  error
}

type cacheMachine struct {
	tb      testing.TB
	s       *store.Store
	f       *fsm.FSM
	next    uint64
	now     int64
	snaps   [][]byte
	watches []watched
}

func (m *cacheMachine) drawKey(t *rapid.T) model.ServiceKey {
	return rapid.SampledFrom(cacheKeys).Draw(t, "key")
}

func (m *cacheMachine) drawRef(t *rapid.T) model.InstanceRef {
	k := m.drawKey(t)
	return model.InstanceRef{Namespace: k.Namespace, Group: k.Group, Service: k.Service,
		IP: rapid.SampledFrom(cacheIPs).Draw(t, "ip"), Port: rapid.SampledFrom(cachePorts).Draw(t, "port")}
}

// drawCommand draws one write of any kind.
func (m *cacheMachine) drawCommand(t *rapid.T) fsm.Command {
	m.now += 1000
	switch rapid.IntRange(0, 11).Draw(t, "kind") {
	case 0, 1:
		ref := m.drawRef(t)
		return fsm.RegisterInstanceRequest{Instance: model.Instance{
			Namespace: ref.Namespace, Group: ref.Group, Service: ref.Service, IP: ref.IP, Port: ref.Port,
			Cluster: rapid.SampledFrom(cacheClusters).Draw(t, "cluster"), Weight: rapid.SampledFrom(propWeights).Draw(t, "weight"),
			Enabled: rapid.Bool().Draw(t, "enabled"), Healthy: rapid.Bool().Draw(t, "healthy"), Metadata: drawMetadata(t, "metadata"),
		}}
	case 2:
		var p model.InstancePatch
		if rapid.Bool().Draw(t, "patchCluster") {
			p.Cluster = new(rapid.SampledFrom(cacheClusters).Draw(t, "cluster"))
		}
		if rapid.Bool().Draw(t, "patchWeight") {
			p.Weight = new(rapid.SampledFrom(propWeights).Draw(t, "weight"))
		}
		if rapid.Bool().Draw(t, "patchEnabled") {
			p.Enabled = new(rapid.Bool().Draw(t, "enabled"))
		}
		if rapid.Bool().Draw(t, "patchMetadata") {
			p.Metadata = new(drawMetadata(t, "metadata"))
		}
		return fsm.UpdateInstanceRequest{Ref: m.drawRef(t), Patch: p}
	case 3:
		return fsm.DeregisterInstanceRequest{Ref: m.drawRef(t)}
	case 4:
		k := m.drawKey(t)
		return fsm.UpsertServiceRequest{Service: model.Service{Namespace: k.Namespace, Group: k.Group, Name: k.Service,
			ProtectThreshold: rapid.SampledFrom(propThresholds).Draw(t, "threshold"), Metadata: drawMetadata(t, "metadata")}}
	case 5:
		return fsm.DeleteServiceRequest{Key: m.drawKey(t)}
	case 6:
		k := m.drawKey(t)
		return fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: k.Namespace, Group: k.Group, Service: k.Service,
			Name: rapid.SampledFrom(cacheClusters).Draw(t, "cluster"), HealthCheck: rapid.SampledFrom(propChecks).Draw(t, "check"),
			Metadata: drawMetadata(t, "metadata")}}
	case 7:
		ref := m.drawRef(t)
		return fsm.SetHealthAtRequest{At: m.now, Updates: []model.HealthUpdate{{
			Ref: ref, Epoch: m.epoch(t, ref), Healthy: rapid.Bool().Draw(t, "healthy")}}}
	case 8:
		return fsm.SetHealthManualAtRequest{Ref: m.drawRef(t), Healthy: rapid.Bool().Draw(t, "healthy"), At: m.now}
	case 9:
		ref := m.drawRef(t)
		_, in, _ := m.s.Instance(nil, ref)
		return fsm.AutoDeregisterRequest{At: m.now, Instance: store.AutoDeregistration{Ref: ref, Epoch: m.epoch(t, ref), UnhealthySince: in.UnhealthySince}}
	case 10:
		// A conditional update, on the instance's or on its service's modify index.
		ref, onService := m.drawRef(t), rapid.Bool().Draw(t, "onService")
		idx, in, _ := m.s.Instance(nil, ref)
		want := in.ModifyIndex
		if onService {
			want = idx
		}
		cas, err := fsm.NewCAS(want, onService, fsm.UpdateInstanceRequest{Ref: ref, Patch: model.InstancePatch{Weight: new(rapid.SampledFrom(propWeights).Draw(t, "weight"))}})
		if err != nil {
			t.Fatal(err)
		}
		return cas
	default:
		if rapid.Bool().Draw(t, "deleteNamespace") {
			return fsm.DeleteNamespaceRequest{ID: "dev"}
		}
		return fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "dev", Description: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "description")}}
	}
}

// epoch is the registration epoch of ref (read from the file), or a wrong one.
func (m *cacheMachine) epoch(t *rapid.T, ref model.InstanceRef) uint64 {
	_, in, _ := m.s.Instance(nil, ref)
	if rapid.IntRange(0, 4).Draw(t, "wrongEpoch") == 0 {
		return in.CreateIndex + 1
	}
	return in.CreateIndex
}

// write applies one to three commands, as consecutive Raft entries in one batch (one
// transaction) or as one entry carrying them all (a coalesced fsm.BatchRequest).
func (m *cacheMachine) write(t *rapid.T) {
	var cmds [][]byte
	for range rapid.IntRange(1, 3).Draw(t, "commands") {
		data, err := fsm.Encode(m.drawCommand(t))
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, data)
	}
	if rapid.Bool().Draw(t, "coalesced") {
		data, err := fsm.Encode(fsm.BatchRequest{Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		cmds = [][]byte{data}
	}
	var logs []*raft.Log
	for _, data := range cmds {
		m.next = max(m.next, m.f.AppliedIndex()) + 1
		logs = append(logs, &raft.Log{Index: m.next, Term: 1, Type: raft.LogCommand, Data: data})
	}
	m.f.ApplyBatch(logs)
	m.afterWrite(t)
}

func (m *cacheMachine) snapshot(t *rapid.T) {
	sn, err := m.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sn.Close() }()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	m.snaps = append(m.snaps, buf.Bytes())
}

// restore restores one of the snapshots taken, through the FSM.
func (m *cacheMachine) restore(t *rapid.T) {
	if len(m.snaps) == 0 {
		m.snapshot(t)
	}
	snap := rapid.SampledFrom(m.snaps).Draw(t, "snapshot")
	if err := m.f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	m.afterWrite(t)
}

// read reads a view through the cache, compares it with a read of the file and keeps
// its watch set.
func (m *cacheMachine) read(t *rapid.T) {
	key := m.drawKey(t)
	for range 2 { // the first may fill, the second hit
		ws := store.NewWatchSet()
		idx, v, err := m.s.ServiceView(ws, key)
		uidx, uv, uerr := m.s.UncachedServiceView(nil, key)
		if idx != uidx || !reflect.DeepEqual(v, uv) || !sameErr(err, uerr) {
			t.Fatalf("ServiceView(%v) = %d %+v %v\nuncached       %d %+v %v", key, idx, v, err, uidx, uv, uerr)
		}
		m.watches = append(m.watches, watched{key: key, ws: ws, idx: idx, view: v, err: err})
	}
}

// readEncoded reads an encoded response through the cache and compares it with the
// encoding of a read of the file.
func (m *cacheMachine) readEncoded(t *rapid.T) {
	key, variant := m.drawKey(t), rapid.SampledFrom(cacheVariants).Draw(t, "variant")
	for range 2 { // the first may fill, the second hit
		idx, b, err := m.s.EncodedServiceView(nil, key, variant, testEncode(variant))
		uidx, uv, uerr := m.s.UncachedServiceView(nil, key)
		var want []byte
		if uerr == nil {
			want, _ = testEncode(variant)(uidx, uv)
		}
		if idx != uidx || !bytes.Equal(b, want) || !sameErr(err, uerr) {
			t.Fatalf("EncodedServiceView(%v, %s) = %d %s %v\nuncached                %d %s %v", key, variant, idx, b, err, uidx, want, uerr)
		}
	}
}

// afterWrite checks that the cache holds only current views and that the watch set of
// every read whose result is stale fired.
func (m *cacheMachine) afterWrite(t *rapid.T) {
	for _, key := range cacheKeys {
		uidx, uv, _ := m.s.UncachedServiceView(nil, key)
		if idx, v, ok := store.PeekCachedView(m.s, key); ok && (idx != uidx || !reflect.DeepEqual(v, uv)) {
			t.Fatalf("after the write the cache holds %v at %d: %+v\ncurrent %d: %+v", key, idx, v, uidx, uv)
		}
	}
	kept := m.watches[:0]
	for _, w := range m.watches {
		idx, v, err := m.s.UncachedServiceView(nil, w.key)
		current := idx == w.idx && reflect.DeepEqual(v, w.view) && sameErr(err, w.err)
		fired := store.WatchSetFired(w.ws)
		if !current && !fired {
			t.Fatalf("the read of %v at %d is stale (now %d) but its watch set did not fire", w.key, w.idx, idx)
		}
		if !fired {
			kept = append(kept, w)
		}
	}
	m.watches = kept
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return errors.Is(a, model.ErrNotFound) == errors.Is(b, model.ErrNotFound) && a.Error() == b.Error()
}

// TestReadCache_MatchesUncachedReads runs the machine with the default budget and with
// budgets that hold one or two views, so that entries are evicted all the time.
func TestReadCache_MatchesUncachedReads(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.SampledFrom([]int64{0, 5000, 12000}).Draw(rt, "cacheSize")
		s, err := store.Open(filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true, ReadCacheSize: size})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		m := &cacheMachine{tb: t, s: s, f: fsm.New(s, nil)}
		actions := []func(*rapid.T){
			m.write, m.write, m.write, m.write,
			m.snapshot, m.restore,
			m.read, m.read, m.read, m.readEncoded, m.readEncoded, m.readEncoded,
		}
		for range rapid.IntRange(1, 150).Draw(rt, "steps") {
			actions[rapid.IntRange(0, len(actions)-1).Draw(rt, "action")](rt)
		}
	})
}
