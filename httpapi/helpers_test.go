package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// applyCall is one Apply the fake node received.
type applyCall struct {
	Type fsm.MessageType
	Msg  any
}

// fakeNode is a Consensus whose leadership the test controls. It records every call.
type fakeNode struct {
	mu        sync.Mutex
	id        string
	leader    bool
	known     *model.Member
	applies   []applyCall
	applyFn   func(t fsm.MessageType, msg any) (uint64, error)
	nextIndex uint64

	consistentReads, leaderReads int
	readErr                      error
	// members is the configuration Members reports, as the API shows it (it is
	// converted back to raftnode's form, which the API's wire conversion undoes).
	members   []api.Member
	joins     []raftnode.JoinRequest
	removed   []string
	transfers []string
	opErr     error
	ready     bool
	halt      *fsm.Halt
	// leaderNewest, when set, is the newest command type the leader applies
	// (LeaderLacks: a rolling upgrade's older leader).
	leaderNewest uint8
}

func newLeaderNode(id string) *fakeNode {
	n := &fakeNode{id: id, nextIndex: 100, ready: true}
	n.setLeader(true, &model.Member{ID: id, RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"})
	return n
}

// newFollowerNode is a follower that knows leader (nil: no leader).
func newFollowerNode(id string, leader *model.Member) *fakeNode {
	n := &fakeNode{id: id, nextIndex: 100, ready: leader != nil}
	n.setLeader(false, leader)
	return n
}

func (n *fakeNode) setLeader(isLeader bool, leader *model.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leader = isLeader
	n.known = leader
}

func (n *fakeNode) calls() []applyCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]applyCall(nil), n.applies...)
}

func (n *fakeNode) ID() string { return n.id }

func (n *fakeNode) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
	t, msg := cmd.MessageType(), any(cmd)
	n.mu.Lock()
	n.applies = append(n.applies, applyCall{Type: t, Msg: msg})
	fn := n.applyFn
	n.nextIndex++
	idx := n.nextIndex
	n.mu.Unlock()
	if fn != nil {
		return fn(t, msg)
	}
	return idx, nil
}

func (n *fakeNode) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

func (n *fakeNode) Leader() (model.Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known == nil {
		return model.Member{}, false
	}
	return *n.known, true
}

func (n *fakeNode) ConsistentRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.consistentReads++
	return n.readErr
}

func (n *fakeNode) LeaderRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaderReads++
	return n.readErr
}

// LastContact is 0 on the leader, -1 without a known leader, else 42ms.
func (n *fakeNode) LastContact() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.leader:
		return 0
	case n.known == nil:
		return -1
	default:
		return 42 * time.Millisecond
	}
}

func (n *fakeNode) KnownLeader() bool {
	_, ok := n.Leader()
	return ok
}

func (n *fakeNode) Ready() (bool, raftnode.Readiness) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rd := raftnode.Readiness{AppliedIndex: 7, CommitIndex: 7, LeaderCommitIndex: 7, ClusterID: "c0ffee00-0000-4000-8000-000000000001",
		Build: buildinfo.Info{Version: "v0.3.0", Commit: "0123456789abcdef", GoVersion: "go1.26.8"}, NewestCommand: 23}
	if n.known != nil {
		rd.Leader = n.known.ID
	}
	if !n.ready {
		rd.Reason = "no leader"
	}
	if n.halt != nil {
		rd.Halt, rd.Reason = n.halt, n.halt.Error()
	}
	return n.ready, rd
}

func (n *fakeNode) Members(context.Context) ([]raftnode.Member, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []raftnode.Member
	for _, m := range n.members {
		lc := time.Duration(-1)
		if m.LastContactMillis >= 0 {
			lc = time.Duration(m.LastContactMillis) * time.Millisecond
		}
		out = append(out, raftnode.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr,
			Voter: m.Voter, Leader: m.Leader, LastContact: lc,
			Build: raftnode.ServerBuild{ID: m.ID, Version: m.Version, Commit: m.Commit, NewestCommand: m.NewestCommand}})
	}
	return out, n.opErr
}

func (n *fakeNode) Join(_ context.Context, req raftnode.JoinRequest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.joins = append(n.joins, req)
	return n.opErr
}

func (n *fakeNode) LeaderLacks(t fsm.MessageType) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leaderNewest == 0 || uint8(t) <= n.leaderNewest || n.known == nil {
		return nil
	}
	return &raftnode.UpgradeRequiredError{Command: t, Required: t,
		Servers: []raftnode.ServerBuild{{ID: n.known.ID, NewestCommand: n.leaderNewest}}}
}

func (n *fakeNode) RemoveServer(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.removed = append(n.removed, id)
	return n.opErr
}

func (n *fakeNode) TransferLeadership(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.transfers = append(n.transfers, id)
	return n.opErr
}

// fakeReader is an in-memory Reader over fixed data. Every read watches one channel
// that bump closes (and replaces), raising the index.
type fakeReader struct {
	mu         sync.Mutex
	index      uint64
	changed    chan struct{}
	namespaces []model.Namespace
	services   []model.Service
	clusters   []model.Cluster
	instances  []model.Instance
	members    []model.Member
	reads      int
}

func newFakeReader() *fakeReader {
	return &fakeReader{
		index:      10,
		changed:    make(chan struct{}),
		namespaces: []model.Namespace{{ID: "public", Name: "public", CreateIndex: 1, ModifyIndex: 1}},
		members:    []model.Member{{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"}},
	}
}

// bump applies fn to the data under the lock, raises the index and wakes watchers.
func (f *fakeReader) bump(fn func(f *fakeReader)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fn != nil {
		fn(f)
	}
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeReader) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fakeReader) begin(ws *store.WatchSet) uint64 {
	f.reads++
	if ws != nil {
		ws.Add(f.changed)
	}
	return f.index
}

func (f *fakeReader) Namespaces(ws *store.WatchSet) (uint64, []model.Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begin(ws), append([]model.Namespace(nil), f.namespaces...), nil
}

func (f *fakeReader) Namespace(ws *store.WatchSet, id string) (uint64, model.Namespace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.begin(ws)
	for _, n := range f.namespaces {
		if n.ID == id {
			return idx, n, nil
		}
	}
	return idx, model.Namespace{}, model.ErrNotFound
}

func (f *fakeReader) ServiceSummaries(ws *store.WatchSet, ns string, filter store.ServiceFilter, page, size int) (uint64, []store.ServiceSummary, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.begin(ws)
	var out []store.ServiceSummary
	for _, s := range f.services {
		if s.Namespace == ns && (filter.Group == "" || s.Group == filter.Group) &&
			strings.Contains(strings.ToLower(s.Name), strings.ToLower(filter.Name)) {
			sum := store.ServiceSummary{Service: s}
			for _, in := range f.instancesOf(s.Key()) {
				sum.Instances++
				if in.Healthy {
					sum.Healthy++
				}
				if in.Enabled {
					sum.Enabled++
					if in.Healthy {
						sum.EnabledHealthy++
					}
				}
			}
			out = append(out, sum)
		}
	}
	total := len(out)
	if size > 0 {
		lo := min((page-1)*size, total)
		out = out[lo:min(lo+size, total)]
	}
	return idx, out, total, nil
}

func (f *fakeReader) service(key model.ServiceKey) (model.Service, bool) {
	for _, s := range f.services {
		if s.Key() == key {
			return s, true
		}
	}
	return model.Service{}, false
}

func (f *fakeReader) Clusters(ws *store.WatchSet, key model.ServiceKey) (uint64, []model.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.begin(ws)
	if _, ok := f.service(key); !ok {
		return idx, nil, model.ErrNotFound
	}
	var out []model.Cluster
	for _, c := range f.clusters {
		if c.Namespace == key.Namespace && c.Group == key.Group && c.Service == key.Service {
			out = append(out, c)
		}
	}
	return idx, out, nil
}

func (f *fakeReader) Cluster(ws *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error) {
	idx, list, err := f.Clusters(ws, key)
	if err != nil {
		return idx, model.Cluster{}, err
	}
	for _, c := range list {
		if c.Name == name {
			return idx, c, nil
		}
	}
	return idx, model.Cluster{}, model.ErrNotFound
}

func (f *fakeReader) instancesOf(key model.ServiceKey) []model.Instance {
	var out []model.Instance
	for _, in := range f.instances {
		if in.ServiceKey() == key {
			out = append(out, in)
		}
	}
	return out
}

func (f *fakeReader) Instance(ws *store.WatchSet, ref model.InstanceRef) (uint64, model.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.begin(ws)
	for _, in := range f.instances {
		if in.Ref() == ref {
			return idx, in, nil
		}
	}
	return idx, model.Instance{}, model.ErrNotFound
}

// EncodedServiceView encodes ServiceView's result, caching nothing.
func (f *fakeReader) EncodedServiceView(ws *store.WatchSet, key model.ServiceKey, _ string, encode func(uint64, store.ServiceView) ([]byte, error)) (uint64, []byte, error) {
	idx, v, err := f.ServiceView(ws, key)
	if err != nil {
		return idx, nil, err
	}
	b, err := encode(idx, v)
	return idx, b, err
}

func (f *fakeReader) ServiceView(ws *store.WatchSet, key model.ServiceKey) (uint64, store.ServiceView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	idx := f.begin(ws)
	svc, ok := f.service(key)
	if !ok {
		return idx, store.ServiceView{}, model.ErrNotFound
	}
	var cl []model.Cluster
	for _, c := range f.clusters {
		if c.Namespace == key.Namespace && c.Group == key.Group && c.Service == key.Service {
			cl = append(cl, c)
		}
	}
	return idx, store.ServiceView{Service: svc, Clusters: cl, Instances: f.instancesOf(key)}, nil
}

func (f *fakeReader) Members(ws *store.WatchSet) (uint64, []model.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begin(ws), append([]model.Member(nil), f.members...), nil
}

func (f *fakeReader) Settings(*store.WatchSet) (uint64, model.Settings, error) {
	return 1, model.DefaultSettings(), nil
}

// The fake holds no tokens (the ACL tests run on real stores).
func (f *fakeReader) Tokens(*store.WatchSet) (uint64, []acl.Token, error) { return 1, nil, nil }

func (f *fakeReader) Token(_ *store.WatchSet, accessor string) (uint64, acl.Token, error) {
	return 1, acl.Token{}, fmt.Errorf("token %q: %w", accessor, model.ErrNotFound)
}

// testRegistry is a Registry over the fakes.
func testRegistry(node registry.Raft, rd registry.SettingsSource) *registry.Registry {
	r, err := registry.New(registry.Config{Settings: rd, Raft: node, RequestTimeout: 2 * time.Second})
	if err != nil {
		panic(err)
	}
	return r
}

// testConfig is a Config over the fakes with short timeouts.
// testNode is what the fakes of the consensus layer implement.
type testNode interface {
	Consensus
	registry.Raft
}

func testConfig(node testNode, rd Reader) Config {
	settings, ok := rd.(registry.SettingsSource)
	if !ok {
		settings = &fakeReader{}
	}
	return Config{
		Store:          rd,
		Node:           node,
		Registry:       testRegistry(node, settings),
		Logger:         discardLogger(),
		RequestTimeout: 2 * time.Second,
		LeaderHold:     300 * time.Millisecond,
		Metrics:        prometheus.NewRegistry(),
	}
}

func mustNew(t *testing.T, cfg Config) http.Handler {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { h.(interface{ CloseIdleConnections() }).CloseIdleConnections() })
	return h
}

// response is a recorded answer.
type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r response) errorBody(t *testing.T) api.Error {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(r.Body, &eb); err != nil {
		t.Fatalf("error body %q: %v", r.Body, err)
	}
	return eb.Error
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

// do sends one request to h in process. body is JSON-encoded unless it is a string or
// []byte, which are sent as is.
func do(t *testing.T, h http.Handler, method, target string, body any) response {
	t.Helper()
	req := newRequest(t, method, target, body)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

func newRequest(t *testing.T, method, target string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req := httptest.NewRequest(method, target, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// doHTTP sends one request over the network to a server at base.
func doHTTP(t *testing.T, method, url string, body any, header http.Header) response {
	t.Helper()
	req := newRequest(t, method, url, body)
	req.RequestURI = ""
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

const (
	svcPath  = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/orders"
	instPath = svcPath + "/instances/127.100.0.1:8080"
)

// seededReader holds namespace public with service orders: clusters DEFAULT and
// manual, instances 127.100.0.1:8080 (healthy), 127.100.0.2:8080 (unhealthy),
// 127.100.0.3:8080 (healthy, disabled) and [::1]:9090 (manual, healthy).
func seededReader() *fakeReader {
	f := newFakeReader()
	key := model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders"}
	f.services = []model.Service{{Namespace: "public", Group: "DEFAULT_GROUP", Name: "orders", CreateIndex: 2, ModifyIndex: 9}}
	f.clusters = []model.Cluster{
		{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", Name: "DEFAULT", HealthCheck: model.DefaultHealthCheck()},
		{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", Name: "manual", HealthCheck: model.HealthCheck{Type: model.CheckNone}.WithDefaults()},
	}
	mk := func(ip string, port int, cluster string, healthy, enabled bool) model.Instance {
		return model.Instance{Namespace: key.Namespace, Group: key.Group, Service: key.Service, IP: ip, Port: port,
			Cluster: cluster, Weight: 1, Healthy: healthy, Enabled: enabled, CreateIndex: 3, ModifyIndex: 3}
	}
	f.instances = []model.Instance{
		mk("127.100.0.1", 8080, "DEFAULT", true, true),
		mk("127.100.0.2", 8080, "DEFAULT", false, true),
		mk("127.100.0.3", 8080, "DEFAULT", true, false),
		mk("::1", 9090, "manual", true, true),
	}
	return f
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

type fsmType = fsm.MessageType

// registeredWeight is the weight of the instance a RegisterInstance call carried.
func registeredWeight(t *testing.T, c applyCall) float64 {
	t.Helper()
	req, ok := c.Msg.(fsm.RegisterInstanceRequest)
	if !ok {
		t.Fatalf("applied %T, want a RegisterInstanceRequest", c.Msg)
	}
	return req.Instance.Weight
}
