package nacos

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// withBody is r's context with b as the buffered body, as nacosBody leaves it.
func withBody(r *http.Request, b []byte) context.Context {
	return httpx.WithBody(r.Context(), b)
}

// nacosDo sends one Nacos request to h in process; a non-empty form is sent as an
// application/x-www-form-urlencoded body.
func nacosDo(t *testing.T, h http.Handler, method, target, form string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// nacosHTTP sends one Nacos request over the network.
func nacosHTTP(t *testing.T, method, url, form string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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

// mustNacos sends a Nacos request and checks its status.
func mustNacos(t *testing.T, h http.Handler, method, target, form string, want int) response {
	t.Helper()
	resp := nacosDo(t, h, method, target, form)
	if resp.Code != want {
		t.Fatalf("%s %s %s: %d %s, want %d", method, target, form, resp.Code, resp.Body, want)
	}
	return resp
}

// mustOK sends a v1 write and checks it answered the text "ok".
func mustOK(t *testing.T, h http.Handler, method, target, form string) {
	t.Helper()
	resp := mustNacos(t, h, method, target, form, http.StatusOK)
	if string(resp.Body) != "ok" {
		t.Fatalf("%s %s: body %q, want ok", method, target, resp.Body)
	}
}

// envelope decodes a v2 answer.
func (r response) envelope(t *testing.T) (code int, message string, data json.RawMessage) {
	t.Helper()
	var env struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || env.Code == nil || env.Message == nil {
		t.Fatalf("not a v2 envelope: %q (%v)", r.Body, err)
	}
	return *env.Code, *env.Message, env.Data
}

// sameShape checks that got has every field of the documented example doc, with the
// same JSON type, recursively (arrays through their first element). A null in doc
// matches anything.
func sameShape(t *testing.T, path string, doc, got any) {
	t.Helper()
	if doc == nil {
		return
	}
	switch d := doc.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %T, documented as an object", path, got)
			return
		}
		for k, dv := range d {
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s.%s: missing (documented)", path, k)
				continue
			}
			sameShape(t, path+"."+k, dv, gv)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			t.Errorf("%s: got %T, documented as an array", path, got)
			return
		}
		if len(d) > 0 && len(g) > 0 {
			sameShape(t, path+"[0]", d[0], g[0])
		}
	default:
		if got == nil {
			t.Errorf("%s: got null, documented as %T", path, doc)
			return
		}
		if dt, gt := jsonType(doc), jsonType(got); dt != gt {
			t.Errorf("%s: got a %s, documented as a %s", path, gt, dt)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// appliedTypes lists the command types the test node applied.
func appliedTypes(n *testNode) []fsm.MessageType {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fsm.MessageType(nil), n.applies...)
}

// mustInstance reads one instance from the store.
func mustInstance(t *testing.T, st *store.Store, ref model.InstanceRef) model.Instance {
	t.Helper()
	_, in, err := st.Instance(nil, ref)
	if err != nil {
		t.Fatalf("instance %+v: %v", ref, err)
	}
	return in
}

// response is a recorded answer.
type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// testNode is the Raft node under a test API: its leadership is the test's to set, and
// Apply commits through the real FSM on the API's store as Raft would.
type testNode struct {
	mu      sync.Mutex
	id      string
	leader  bool
	known   *model.Member
	ready   bool
	members []raftnode.Member
	f       *fsm.FSM
	index   uint64
	applies []fsm.MessageType

	leaderReads, consistentReads int
}

func (n *testNode) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return 0, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.applies = append(n.applies, cmd.MessageType())
	n.index++
	res := n.f.Apply(&raft.Log{Index: n.index, Term: 1, Type: raft.LogCommand, Data: data}).(*fsm.Result)
	return res.Index, res.Err
}

func (n *testNode) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

func (n *testNode) Leader() (model.Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known == nil {
		return model.Member{}, false
	}
	return *n.known, true
}

func (n *testNode) KnownLeader() bool {
	_, ok := n.Leader()
	return ok
}

func (n *testNode) LastContact() time.Duration {
	if n.IsLeader() {
		return 0
	}
	return 42 * time.Millisecond
}

func (n *testNode) Ready() (bool, raftnode.Readiness) {
	n.mu.Lock()
	defer n.mu.Unlock()
	rd := raftnode.Readiness{Ready: n.ready, AppliedIndex: n.index, CommitIndex: n.index}
	if n.known != nil {
		rd.Leader = n.known.ID
	}
	if !n.ready {
		rd.Reason = "no leader"
	}
	return n.ready, rd
}

func (n *testNode) Members(context.Context) ([]raftnode.Member, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members, nil
}

func (n *testNode) ConsistentRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.consistentReads++
	return nil
}

func (n *testNode) LeaderRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaderReads++
	return nil
}

// newTestAPI is the Nacos API of node id over a fresh store; leader is the member the
// node takes for the leader (itself when nil).
func newTestAPI(t testing.TB, id string, leader *model.Member) (http.Handler, *store.Store, *testNode) {
	t.Helper()
	return newTestAPIWith(t, id, leader, nil)
}

// newTestAPIWith is newTestAPI with configure (nil: none) adjusting the configuration.
func newTestAPIWith(t testing.TB, id string, leader *model.Member, configure func(*store.Store, *Config)) (http.Handler, *store.Store, *testNode) {
	t.Helper()
	st := storetest.Open(t)
	node := &testNode{id: id, leader: leader == nil, known: leader, ready: true, f: fsm.New(st, nil)}
	if leader == nil {
		node.known = &model.Member{ID: id, RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"}
	}
	reg, err := registry.New(registry.Config{Settings: st, Raft: node, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	met, err := httpx.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := httpx.NewForwarder(httpx.ForwarderConfig{Node: node, NodeID: id, Metrics: met,
		RequestTimeout: 2 * time.Second, LeaderHold: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.CloseIdleConnections)
	cfg := Config{NodeID: id, Store: st, Node: node, Registry: reg, Forwarder: fwd, Metrics: met,
		Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(st, &cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, st, node
}

// newStoreAPI is the Nacos API of a leader over a fresh store.
func newStoreAPI(t testing.TB) (http.Handler, *store.Store, *testNode) {
	t.Helper()
	return newTestAPI(t, "n1", nil)
}

// seedOrders registers the orders service's fixture through h: three instances of
// DEFAULT (127.100.0.1 healthy, .2 unhealthy, .3 disabled) and [::1]:9090 in a NONE
// cluster "manual".
func seedOrders(t *testing.T, h http.Handler) {
	t.Helper()
	mustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders")
	mustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=orders&clusterName=manual&healthChecker={"type":"NONE"}`)
	for _, form := range []string{
		"ip=127.100.0.1&port=8080",
		"ip=127.100.0.2&port=8080&healthy=false",
		"ip=127.100.0.3&port=8080&enabled=false",
		"ip=::1&port=9090&clusterName=manual",
	} {
		mustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ephemeral=false&"+form)
	}
}

// newRequest builds a Nacos request with a form body, as BufferBody leaves it.
func newRequest(t *testing.T, method, target string, form string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req.WithContext(httpx.WithBody(req.Context(), []byte(form)))
}
