package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// This file checks the store against a plain in-memory model of its contract: any
// sequence of writes (single operations and batches of them in one transaction,
// committed or aborted), interleaved with snapshots, restores and reopens, leaves the
// store in exactly the model's state — every record with its create and modify
// indexes, the index table and the applied index — and every write fails or succeeds
// as the model says (model.ErrInvalid, model.ErrNotFound, model.ErrConflict).

// instanceID and clusterID key the model's maps.
type instanceID struct {
	key  model.ServiceKey
	ip   string
	port int
}

type clusterID struct {
	key  model.ServiceKey
	name string
}

// storeModel is the reference implementation: maps of records and the index table.
type storeModel struct {
	limits     model.Limits
	namespaces map[string]model.Namespace
	services   map[model.ServiceKey]model.Service
	clusters   map[clusterID]model.Cluster
	instances  map[instanceID]model.Instance
	members    map[string]model.Member
	indexes    map[string]uint64
	applied    uint64
}

// newStoreModel is the state of a new store: the "public" namespace with index 0.
func newStoreModel() *storeModel {
	return &storeModel{
		limits:     model.DefaultLimits(),
		namespaces: map[string]model.Namespace{model.DefaultNamespace: {ID: model.DefaultNamespace, Name: model.DefaultNamespace}},
		services:   map[model.ServiceKey]model.Service{},
		clusters:   map[clusterID]model.Cluster{},
		instances:  map[instanceID]model.Instance{},
		members:    map[string]model.Member{},
		indexes:    map[string]uint64{},
	}
}

func (m *storeModel) clone() *storeModel {
	return &storeModel{
		limits: m.limits, namespaces: maps.Clone(m.namespaces), services: maps.Clone(m.services),
		clusters: maps.Clone(m.clusters), instances: maps.Clone(m.instances), members: maps.Clone(m.members),
		indexes: maps.Clone(m.indexes), applied: m.applied,
	}
}

func errInvalidf(format string, args ...any) error {
	return fmt.Errorf("model: "+format+": %w", append(args, model.ErrInvalid)...)
}

func errNotFoundf(format string, args ...any) error {
	return fmt.Errorf("model: "+format+": %w", append(args, model.ErrNotFound)...)
}

func errConflictf(format string, args ...any) error {
	return fmt.Errorf("model: "+format+": %w", append(args, model.ErrConflict)...)
}

func normMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func (m *storeModel) bump(key string, idx uint64) {
	if idx > m.indexes[key] {
		m.indexes[key] = idx
	}
}

func servicesIndex(ns string) string { return "services/" + ns }

// ensureNamespace creates a namespace implicitly (name = id).
func (m *storeModel) ensureNamespace(idx uint64, id string) {
	if _, ok := m.namespaces[id]; ok {
		return
	}
	m.namespaces[id] = model.Namespace{ID: id, Name: id, CreateIndex: idx, ModifyIndex: idx}
	m.bump(servicesIndex(id), idx)
	m.bump("namespaces", idx)
}

// touchService stores svc (created with CreateIndex idx if new) with ModifyIndex idx:
// every change to a service, its clusters or instances goes through here.
func (m *storeModel) touchService(idx uint64, key model.ServiceKey, def *model.Service) {
	svc, ok := m.services[key]
	if !ok {
		m.ensureNamespace(idx, key.Namespace)
		svc = model.Service{Namespace: key.Namespace, Group: key.Group, Name: key.Service, CreateIndex: idx}
	}
	if def != nil {
		svc.ProtectThreshold, svc.Metadata = def.ProtectThreshold, def.Metadata
	}
	svc.ModifyIndex = idx
	m.services[key] = svc
	m.bump(servicesIndex(key.Namespace), idx)
}

func (m *storeModel) writeInstance(idx uint64, in model.Instance) {
	key := in.ServiceKey()
	m.touchService(idx, key, nil)
	cid := clusterID{key, in.Cluster}
	if _, ok := m.clusters[cid]; !ok {
		m.clusters[cid] = model.Cluster{Namespace: key.Namespace, Group: key.Group, Service: key.Service,
			Name: in.Cluster, HealthCheck: model.DefaultHealthCheck(), CreateIndex: idx, ModifyIndex: idx}
	}
	in.ModifyIndex = idx
	m.instances[instanceID{key, in.IP, in.Port}] = in
}

func (m *storeModel) registerInstance(idx uint64, in model.Instance) error {
	in.Metadata = normMap(in.Metadata)
	if err := m.limits.ValidateInstance(in); err != nil {
		return err
	}
	id := instanceID{in.ServiceKey(), in.IP, in.Port}
	in.CreateIndex, in.ModifyIndex = idx, idx
	if old, ok := m.instances[id]; ok {
		in.CreateIndex, in.ModifyIndex, in.Healthy = old.CreateIndex, old.ModifyIndex, old.Healthy
		if reflect.DeepEqual(in, old) {
			return nil
		}
	}
	m.writeInstance(idx, in)
	return nil
}

func (m *storeModel) loadInstance(ref model.InstanceRef) (model.Instance, error) {
	if err := model.ValidateInstanceRef(ref); err != nil {
		return model.Instance{}, err
	}
	in, ok := m.instances[instanceID{ref.ServiceKey(), ref.IP, ref.Port}]
	if !ok {
		return model.Instance{}, errNotFoundf("instance %v", ref)
	}
	return in, nil
}

func (m *storeModel) updateInstance(idx uint64, ref model.InstanceRef, p model.InstancePatch) error {
	old, err := m.loadInstance(ref)
	if err != nil {
		return err
	}
	in := old
	if p.Cluster != nil {
		in.Cluster = *p.Cluster
	}
	if p.Weight != nil {
		in.Weight = *p.Weight
	}
	if p.Enabled != nil {
		in.Enabled = *p.Enabled
	}
	if p.Metadata != nil {
		in.Metadata = normMap(*p.Metadata)
	}
	if err := m.limits.ValidateInstance(in); err != nil {
		return err
	}
	if reflect.DeepEqual(in, old) {
		return nil
	}
	m.writeInstance(idx, in)
	return nil
}

func (m *storeModel) deregisterInstance(idx uint64, ref model.InstanceRef) error {
	if _, err := m.loadInstance(ref); err != nil {
		return err
	}
	m.touchService(idx, ref.ServiceKey(), nil)
	delete(m.instances, instanceID{ref.ServiceKey(), ref.IP, ref.Port})
	return nil
}

func (m *storeModel) upsertService(idx uint64, svc model.Service) error {
	svc.Metadata = normMap(svc.Metadata)
	if err := m.limits.ValidateService(svc); err != nil {
		return err
	}
	if old, ok := m.services[svc.Key()]; ok {
		svc.CreateIndex, svc.ModifyIndex = old.CreateIndex, old.ModifyIndex
		if reflect.DeepEqual(svc, old) {
			return nil
		}
	}
	m.touchService(idx, svc.Key(), &svc)
	return nil
}

func (m *storeModel) deleteService(idx uint64, key model.ServiceKey) error {
	if err := model.ValidateServiceKey(key); err != nil {
		return err
	}
	if _, ok := m.services[key]; !ok {
		return errNotFoundf("service %v", key)
	}
	for id := range m.instances {
		if id.key == key {
			return errConflictf("service %v has instances", key)
		}
	}
	for id := range m.clusters {
		if id.key == key {
			delete(m.clusters, id)
		}
	}
	delete(m.services, key)
	m.bump(servicesIndex(key.Namespace), idx)
	return nil
}

func (m *storeModel) upsertCluster(idx uint64, c model.Cluster) error {
	c.HealthCheck = c.HealthCheck.WithDefaults()
	c.HealthCheck.Headers = normMap(c.HealthCheck.Headers)
	if len(c.HealthCheck.ExpectedStatus) == 0 {
		c.HealthCheck.ExpectedStatus = nil
	}
	c.Metadata = normMap(c.Metadata)
	if err := m.limits.ValidateCluster(c); err != nil {
		return err
	}
	key := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
	cid := clusterID{key, c.Name}
	c.CreateIndex, c.ModifyIndex = idx, idx
	if old, ok := m.clusters[cid]; ok {
		c.CreateIndex, c.ModifyIndex = old.CreateIndex, old.ModifyIndex
		if reflect.DeepEqual(c, old) {
			return nil
		}
		c.ModifyIndex = idx
	}
	m.touchService(idx, key, nil)
	m.clusters[cid] = c
	return nil
}

func (m *storeModel) upsertNamespace(idx uint64, ns model.Namespace) error {
	if ns.Name == "" {
		ns.Name = ns.ID
	}
	if err := model.ValidateNamespaceRecord(ns); err != nil {
		return err
	}
	old, exists := m.namespaces[ns.ID]
	ns.CreateIndex, ns.ModifyIndex = idx, idx
	if exists {
		ns.CreateIndex, ns.ModifyIndex = old.CreateIndex, old.ModifyIndex
		if reflect.DeepEqual(ns, old) {
			return nil
		}
		ns.ModifyIndex = idx
	}
	m.namespaces[ns.ID] = ns
	if !exists {
		m.bump(servicesIndex(ns.ID), idx)
	}
	m.bump("namespaces", idx)
	return nil
}

func (m *storeModel) deleteNamespace(idx uint64, id string) error {
	if err := model.ValidateNamespace(id); err != nil {
		return err
	}
	if id == model.DefaultNamespace {
		return errConflictf("namespace %q cannot be deleted", id)
	}
	if _, ok := m.namespaces[id]; !ok {
		return errNotFoundf("namespace %q", id)
	}
	for key := range m.services {
		if key.Namespace == id {
			return errConflictf("namespace %q has services", id)
		}
	}
	delete(m.namespaces, id)
	delete(m.indexes, servicesIndex(id))
	m.bump("namespaces", idx)
	return nil
}

func (m *storeModel) setHealth(idx uint64, ups []model.HealthUpdate) (int, error) {
	applied := 0
	for _, u := range ups {
		if model.ValidateInstanceRef(u.Ref) != nil {
			continue
		}
		in, ok := m.instances[instanceID{u.Ref.ServiceKey(), u.Ref.IP, u.Ref.Port}]
		if !ok || in.CreateIndex != u.Epoch || in.Healthy == u.Healthy {
			continue
		}
		if m.clusters[clusterID{in.ServiceKey(), in.Cluster}].HealthCheck.Type == model.CheckNone {
			continue
		}
		in.Healthy = u.Healthy
		m.writeInstance(idx, in)
		applied++
	}
	return applied, nil
}

func (m *storeModel) setHealthManual(idx uint64, ref model.InstanceRef, healthy bool) error {
	in, err := m.loadInstance(ref)
	if err != nil {
		return err
	}
	if m.clusters[clusterID{in.ServiceKey(), in.Cluster}].HealthCheck.Type != model.CheckNone {
		return errConflictf("cluster %q is probed", in.Cluster)
	}
	if in.Healthy == healthy {
		return nil
	}
	in.Healthy = healthy
	m.writeInstance(idx, in)
	return nil
}

func (m *storeModel) upsertMember(idx uint64, mem model.Member) error {
	if err := model.ValidateMember(mem); err != nil {
		return err
	}
	if old, ok := m.members[mem.ID]; ok && old == mem {
		return nil
	}
	m.members[mem.ID] = mem
	m.bump("members", idx)
	return nil
}

func (m *storeModel) removeMember(idx uint64, id string) error {
	if id == "" {
		return errInvalidf("empty member id")
	}
	if _, ok := m.members[id]; !ok {
		return nil
	}
	delete(m.members, id)
	m.bump("members", idx)
	return nil
}

// op is one generated write: apply runs it in a store transaction, model on the model.
// Both return the error and, for SetHealth, the number of updates applied.
type op struct {
	name  string
	apply func(tx *store.Txn, idx uint64) (int, error)
	model func(m *storeModel, idx uint64) (int, error)
}

func (o op) String() string { return o.name }

// Small domains make collisions (replace, conflict, not found) frequent; each domain
// includes an invalid value.
var (
	propNamespaces = []string{model.DefaultNamespace, "dev", "ops", "bad ns"}
	propGroups     = []string{model.DefaultGroup, "g1"}
	propServices   = []string{"orders", "pay", "@bad"}
	propClusters   = []string{model.DefaultCluster, "blue", "bad cluster"}
	propIPs        = []string{"127.100.0.1", "::1", "db.local", ""}
	propPorts      = []int{80, 8080, 0}
	propWeights    = []float64{0, 1, 2.5, model.MaxWeight, model.MaxWeight + 1}
	propMetadata   = []map[string]string{nil, {}, {"v": "1"}, {"v": "2", "zone": "a"}, {"": "x"}}
	propThresholds = []float64{0, 0.5, 1, 1.5}
	propChecks     = []model.HealthCheck{
		{},
		{Type: model.CheckNone},
		{Type: model.CheckHTTP, Path: "/health", Headers: map[string]string{}, ExpectedStatus: []int{200}},
		{Type: model.CheckTCP, Port: 9000, Interval: model.Duration(2e9), Timeout: model.Duration(1e9), Rise: 1, Fall: 1},
		{Type: model.CheckTCP, Interval: model.Duration(1e7)}, // invalid: interval below 1s
	}
	propMembers = []string{"n1", "n2", ""}
)

func drawKey(t *rapid.T) model.ServiceKey {
	return model.ServiceKey{
		Namespace: rapid.SampledFrom(propNamespaces).Draw(t, "ns"),
		Group:     rapid.SampledFrom(propGroups).Draw(t, "group"),
		Service:   rapid.SampledFrom(propServices).Draw(t, "service"),
	}
}

func drawRef(t *rapid.T) model.InstanceRef {
	k := drawKey(t)
	return model.InstanceRef{Namespace: k.Namespace, Group: k.Group, Service: k.Service,
		IP: rapid.SampledFrom(propIPs).Draw(t, "ip"), Port: rapid.SampledFrom(propPorts).Draw(t, "port")}
}

func drawMetadata(t *rapid.T, label string) map[string]string {
	return maps.Clone(rapid.SampledFrom(propMetadata).Draw(t, label))
}

// existingRef draws the ref of an instance the model holds (or any ref when it holds none),
// so that updates, deregistrations and health changes often hit something.
func existingRef(t *rapid.T, m *storeModel) model.InstanceRef {
	if len(m.instances) == 0 || rapid.IntRange(0, 3).Draw(t, "anyRef") == 0 {
		return drawRef(t)
	}
	ids := slices.SortedFunc(maps.Keys(m.instances), func(a, b instanceID) int {
		return cmpString(fmt.Sprint(a), fmt.Sprint(b))
	})
	in := m.instances[rapid.SampledFrom(ids).Draw(t, "instance")]
	return in.Ref()
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// drawOp draws one write; m (the model before the write) guides the choice of targets.
func drawOp(t *rapid.T, m *storeModel) op {
	switch rapid.IntRange(0, 11).Draw(t, "kind") {
	case 0, 1:
		k := drawKey(t)
		in := model.Instance{Namespace: k.Namespace, Group: k.Group, Service: k.Service,
			IP: rapid.SampledFrom(propIPs).Draw(t, "ip"), Port: rapid.SampledFrom(propPorts).Draw(t, "port"),
			Cluster: rapid.SampledFrom(propClusters).Draw(t, "cluster"), Weight: rapid.SampledFrom(propWeights).Draw(t, "weight"),
			Enabled: rapid.Bool().Draw(t, "enabled"), Healthy: rapid.Bool().Draw(t, "healthy"),
			Metadata: drawMetadata(t, "metadata")}
		if rapid.Bool().Draw(t, "replace") {
			ref := existingRef(t, m)
			in.Namespace, in.Group, in.Service, in.IP, in.Port = ref.Namespace, ref.Group, ref.Service, ref.IP, ref.Port
		}
		return op{name: fmt.Sprintf("RegisterInstance(%+v)", in),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.RegisterInstance(idx, in) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.registerInstance(idx, in) }}
	case 2:
		ref := existingRef(t, m)
		var p model.InstancePatch
		if rapid.Bool().Draw(t, "patchCluster") {
			c := rapid.SampledFrom(propClusters).Draw(t, "cluster")
			p.Cluster = &c
		}
		if rapid.Bool().Draw(t, "patchWeight") {
			w := rapid.SampledFrom(propWeights).Draw(t, "weight")
			p.Weight = &w
		}
		if rapid.Bool().Draw(t, "patchEnabled") {
			e := rapid.Bool().Draw(t, "enabled")
			p.Enabled = &e
		}
		if rapid.Bool().Draw(t, "patchMetadata") {
			md := drawMetadata(t, "metadata")
			p.Metadata = &md
		}
		return op{name: fmt.Sprintf("UpdateInstance(%+v, %s)", ref, describePatch(p)),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.UpdateInstance(idx, ref, p) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.updateInstance(idx, ref, p) }}
	case 3:
		ref := existingRef(t, m)
		return op{name: fmt.Sprintf("DeregisterInstance(%+v)", ref),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.DeregisterInstance(idx, ref) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.deregisterInstance(idx, ref) }}
	case 4:
		k := drawKey(t)
		svc := model.Service{Namespace: k.Namespace, Group: k.Group, Name: k.Service,
			ProtectThreshold: rapid.SampledFrom(propThresholds).Draw(t, "threshold"), Metadata: drawMetadata(t, "metadata")}
		return op{name: fmt.Sprintf("UpsertService(%+v)", svc),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.UpsertService(idx, svc) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.upsertService(idx, svc) }}
	case 5:
		k := drawKey(t)
		return op{name: fmt.Sprintf("DeleteService(%v)", k),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.DeleteService(idx, k) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.deleteService(idx, k) }}
	case 6:
		k := drawKey(t)
		hc := rapid.SampledFrom(propChecks).Draw(t, "check")
		hc.Headers, hc.ExpectedStatus = maps.Clone(hc.Headers), slices.Clone(hc.ExpectedStatus)
		c := model.Cluster{Namespace: k.Namespace, Group: k.Group, Service: k.Service,
			Name: rapid.SampledFrom(propClusters).Draw(t, "cluster"), HealthCheck: hc, Metadata: drawMetadata(t, "metadata")}
		return op{name: fmt.Sprintf("UpsertCluster(%+v)", c),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.UpsertCluster(idx, c) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.upsertCluster(idx, c) }}
	case 7:
		n := rapid.IntRange(1, 3).Draw(t, "updates")
		ups := make([]model.HealthUpdate, n)
		for i := range ups {
			ref := existingRef(t, m)
			epoch := uint64(rapid.IntRange(0, 40).Draw(t, "epoch"))
			if in, ok := m.instances[instanceID{ref.ServiceKey(), ref.IP, ref.Port}]; ok && rapid.IntRange(0, 3).Draw(t, "rightEpoch") > 0 {
				epoch = in.CreateIndex
			}
			ups[i] = model.HealthUpdate{Ref: ref, Epoch: epoch, Healthy: rapid.Bool().Draw(t, "healthy")}
		}
		return op{name: fmt.Sprintf("SetHealth(%+v)", ups),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return tx.SetHealth(idx, ups) },
			model: func(m *storeModel, idx uint64) (int, error) { return m.setHealth(idx, ups) }}
	case 8:
		ref := existingRef(t, m)
		healthy := rapid.Bool().Draw(t, "healthy")
		return op{name: fmt.Sprintf("SetHealthManual(%+v, %v)", ref, healthy),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.SetHealthManual(idx, ref, healthy) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.setHealthManual(idx, ref, healthy) }}
	case 9:
		ns := model.Namespace{ID: rapid.SampledFrom(propNamespaces).Draw(t, "ns"),
			Name:        rapid.SampledFrom([]string{"", "Development", "bad\x01name"}).Draw(t, "name"),
			Description: rapid.SampledFrom([]string{"", "team namespace"}).Draw(t, "description")}
		return op{name: fmt.Sprintf("UpsertNamespace(%+v)", ns),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.UpsertNamespace(idx, ns) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.upsertNamespace(idx, ns) }}
	case 10:
		id := rapid.SampledFrom(propNamespaces).Draw(t, "ns")
		return op{name: fmt.Sprintf("DeleteNamespace(%q)", id),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.DeleteNamespace(idx, id) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.deleteNamespace(idx, id) }}
	default:
		id := rapid.SampledFrom(propMembers).Draw(t, "member")
		if rapid.Bool().Draw(t, "remove") {
			return op{name: fmt.Sprintf("RemoveMember(%q)", id),
				apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.RemoveMember(idx, id) },
				model: func(m *storeModel, idx uint64) (int, error) { return 0, m.removeMember(idx, id) }}
		}
		mem := model.Member{ID: id, RaftAddr: rapid.SampledFrom([]string{"127.100.0.1:7848", "127.100.0.2:7848", "nope"}).Draw(t, "raftAddr"),
			HTTPAddr: rapid.SampledFrom([]string{"", "127.100.0.1:8848"}).Draw(t, "httpAddr")}
		return op{name: fmt.Sprintf("UpsertMember(%+v)", mem),
			apply: func(tx *store.Txn, idx uint64) (int, error) { return 0, tx.UpsertMember(idx, mem) },
			model: func(m *storeModel, idx uint64) (int, error) { return 0, m.upsertMember(idx, mem) }}
	}
}

func describePatch(p model.InstancePatch) string {
	s := "{"
	if p.Cluster != nil {
		s += fmt.Sprintf(" cluster=%q", *p.Cluster)
	}
	if p.Weight != nil {
		s += fmt.Sprintf(" weight=%v", *p.Weight)
	}
	if p.Enabled != nil {
		s += fmt.Sprintf(" enabled=%v", *p.Enabled)
	}
	if p.Metadata != nil {
		s += fmt.Sprintf(" metadata=%v", *p.Metadata)
	}
	return s + " }"
}

// sameOutcome fails unless the store's and the model's answers agree on the result
// count and on the error class.
func sameOutcome(t *rapid.T, what string, gotN int, got error, wantN int, want error) {
	t.Helper()
	for _, class := range []error{model.ErrInvalid, model.ErrNotFound, model.ErrConflict} {
		if errors.Is(got, class) != errors.Is(want, class) {
			t.Fatalf("%s: store says %v, model says %v", what, got, want)
		}
	}
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: store says %v, model says %v", what, got, want)
	}
	if gotN != wantN {
		t.Fatalf("%s: store applied %d, model %d", what, gotN, wantN)
	}
}

// storeMachine runs generated writes against a store and the model in lockstep.
type storeMachine struct {
	tb    testing.TB
	path  string
	s     *store.Store
	model *storeModel
	idx   uint64
}

func openProp(tb testing.TB, path string) *store.Store {
	tb.Helper()
	s, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// single runs one write in its own transaction.
func (sm *storeMachine) single(t *rapid.T) {
	o := drawOp(t, sm.model)
	sm.idx++
	idx := sm.idx
	var gotN int
	got := sm.s.Update(func(tx *store.Txn) error {
		n, err := o.apply(tx, idx)
		gotN = n
		return err
	})
	wantN, want := o.model(sm.model, idx)
	sameOutcome(t, o.name, gotN, got, wantN, want)
}

// batch runs several writes in one transaction, each with its own index, as the FSM
// does, and stores the last index as the applied index. A failed write must leave the
// transaction unchanged for the next one. With abort set the function fails at the end
// and nothing may be written.
func (sm *storeMachine) batch(t *rapid.T) {
	n := rapid.IntRange(2, 5).Draw(t, "batchSize")
	abort := rapid.IntRange(0, 4).Draw(t, "abort") == 0
	next := sm.model.clone()
	ops := make([]op, n)
	idxs := make([]uint64, n)
	wantNs := make([]int, n)
	wantErrs := make([]error, n)
	for i := range ops {
		ops[i] = drawOp(t, next)
		sm.idx++
		idxs[i] = sm.idx
		wantNs[i], wantErrs[i] = ops[i].model(next, idxs[i])
	}
	next.applied = sm.idx
	gotNs := make([]int, n)
	gotErrs := make([]error, n)
	errAbort := errors.New("abort")
	err := sm.s.Update(func(tx *store.Txn) error {
		for i, o := range ops {
			gotNs[i], gotErrs[i] = o.apply(tx, idxs[i])
		}
		if err := tx.SetAppliedIndex(sm.idx); err != nil {
			return err
		}
		if abort {
			return errAbort
		}
		return nil
	})
	for i, o := range ops {
		sameOutcome(t, fmt.Sprintf("batch[%d] %s", i, o.name), gotNs[i], gotErrs[i], wantNs[i], wantErrs[i])
	}
	if abort {
		if !errors.Is(err, errAbort) {
			t.Fatalf("aborted batch: Update returned %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("batch: Update returned %v", err)
	}
	sm.model = next
}

// snapshotRestore takes a snapshot, restores it into a fresh store and into this one:
// both must hold exactly the snapshotted state.
func (sm *storeMachine) snapshotRestore(t *rapid.T) {
	sn, err := sm.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = sn.WriteTo(&buf)
	if cerr := sn.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if sn.AppliedIndex() != sm.model.applied {
		t.Fatalf("snapshot applied index %d, want %d", sn.AppliedIndex(), sm.model.applied)
	}
	raw := buf.Bytes()

	fresh := openProp(sm.tb, filepath.Join(sm.tb.TempDir(), "copy.db"))
	defer func() { _ = fresh.Close() }()
	if err := fresh.Restore(bytes.NewReader(raw)); err != nil {
		t.Fatalf("restore into a new store: %v", err)
	}
	sm.compare(t, fresh, "restored copy")

	if err := sm.s.Restore(bytes.NewReader(raw)); err != nil {
		t.Fatalf("restore in place: %v", err)
	}
	sm.compare(t, sm.s, "restored in place")
}

// reopen closes the store and opens its file again.
func (sm *storeMachine) reopen(t *rapid.T) {
	if err := sm.s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	sm.s = openProp(sm.tb, sm.path)
}

// check compares the whole store with the model.
func (sm *storeMachine) check(t *rapid.T) { sm.compare(t, sm.s, "store") }

func (sm *storeMachine) compare(t *rapid.T, s *store.Store, what string) {
	t.Helper()
	st, err := s.Dump()
	if err != nil {
		t.Fatalf("%s: Dump: %v", what, err)
	}
	m := sm.model
	diff := func(kind string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %s differ:\nstore %+v\nmodel %+v", what, kind, got, want)
		}
	}
	nss := map[string]model.Namespace{}
	for _, ns := range st.Namespaces {
		nss[ns.ID] = ns
	}
	diff("namespaces", nss, m.namespaces)
	svcs := map[model.ServiceKey]model.Service{}
	for _, svc := range st.Services {
		svcs[svc.Key()] = svc
	}
	diff("services", svcs, m.services)
	cls := map[clusterID]model.Cluster{}
	for _, c := range st.Clusters {
		cls[clusterID{model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}, c.Name}] = c
	}
	diff("clusters", cls, m.clusters)
	ins := map[instanceID]model.Instance{}
	for _, in := range st.Instances {
		ins[instanceID{in.ServiceKey(), in.IP, in.Port}] = in
	}
	diff("instances", ins, m.instances)
	mems := map[string]model.Member{}
	for _, mem := range st.Members {
		mems[mem.ID] = mem
	}
	diff("members", mems, m.members)
	diff("index table", st.Indexes, m.indexes)
	if st.AppliedIndex != m.applied {
		t.Fatalf("%s: applied index %d, model %d", what, st.AppliedIndex, m.applied)
	}
	if len(st.Namespaces)+len(st.Services)+len(st.Clusters)+len(st.Instances)+len(st.Members) !=
		len(nss)+len(svcs)+len(cls)+len(ins)+len(mems) {
		t.Fatalf("%s: Dump holds duplicate records", what)
	}
}

// TestStore_MatchesModel runs random sequences of writes, batches, snapshots, restores
// and reopens, comparing the whole store with the model after every step.
func TestStore_MatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		sm := &storeMachine{tb: t, path: filepath.Join(dir, "state.db"), model: newStoreModel()}
		sm.s = openProp(t, sm.path)
		defer func() { _ = sm.s.Close() }()
		sm.check(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"single":  sm.single,
			"single2": sm.single,
			"single3": sm.single,
			"batch":   sm.batch,
			"restore": sm.snapshotRestore,
			"reopen":  sm.reopen,
			"":        sm.check,
		})
	})
}

// TestStore_SnapshotRestoreIsIdentity builds a random state, then checks that a
// snapshot restored into a new store and into the same store reproduces it exactly,
// and that the restored store keeps accepting writes that agree with the model.
func TestStore_SnapshotRestoreIsIdentity(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sm := &storeMachine{tb: t, path: filepath.Join(t.TempDir(), "state.db"), model: newStoreModel()}
		sm.s = openProp(t, sm.path)
		defer func() { _ = sm.s.Close() }()
		for range rapid.IntRange(0, 40).Draw(rt, "writes") {
			sm.single(rt)
		}
		sm.snapshotRestore(rt)
		for range rapid.IntRange(0, 5).Draw(rt, "after") {
			sm.single(rt)
		}
		sm.check(rt)
	})
}
