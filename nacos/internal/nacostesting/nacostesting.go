// Package nacostesting is what the tests of the Nacos surfaces (nacos, the Open API and
// UDP pushes; nacos/grpcapi, the 2.x gRPC server) share: a Raft node double that
// commits through the real FSM, the registry over it, in-process Nacos HTTP calls, and
// ACL tokens. Only tests import it.
package nacostesting

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// Node is the Raft node under a test API: its leadership is the test's to set, and
// Apply commits through the real FSM on the API's store as Raft would.
type Node struct {
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

// Apply commits cmd through the FSM at the next index.
func (n *Node) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
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

// IsLeader reports whether the node takes itself for the leader (SetLeading).
func (n *Node) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

// Leader is the member the node takes for the leader (SetKnownLeader).
func (n *Node) Leader() (model.Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known == nil {
		return model.Member{}, false
	}
	return *n.known, true
}

// KnownLeader reports whether the node knows a leader.
func (n *Node) KnownLeader() bool {
	_, ok := n.Leader()
	return ok
}

// LastContact is 0 on the leader and 42 ms elsewhere.
func (n *Node) LastContact() time.Duration {
	if n.IsLeader() {
		return 0
	}
	return 42 * time.Millisecond
}

// Ready reports the readiness SetReady set, at the node's last applied index.
func (n *Node) Ready() (bool, raftnode.Readiness) {
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

// Members lists the members SetMembers set.
func (n *Node) Members(context.Context) ([]raftnode.Member, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members, nil
}

// ConsistentRead counts a linearizable read and allows it.
func (n *Node) ConsistentRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.consistentReads++
	return nil
}

// LeaderRead counts a leader read and allows it.
func (n *Node) LeaderRead(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaderReads++
	return nil
}

// SetLeading makes the node take itself for the leader, or not.
func (n *Node) SetLeading(leading bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leader = leading
}

// SetKnownLeader sets the member the node takes for the leader (nil: none).
func (n *Node) SetKnownLeader(m *model.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.known = m
}

// SetReady sets what Ready answers.
func (n *Node) SetReady(ready bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ready = ready
}

// SetMembers sets what Members answers.
func (n *Node) SetMembers(ms []raftnode.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members = ms
}

// Reads returns the leader and linearizable reads counted since the last call, and
// resets both counts.
func (n *Node) Reads() (leader, consistent int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	leader, consistent = n.leaderReads, n.consistentReads
	n.leaderReads, n.consistentReads = 0, 0
	return leader, consistent
}

// Applied lists the command types the node applied.
func (n *Node) Applied() []fsm.MessageType {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fsm.MessageType(nil), n.applies...)
}

// Env is what a Nacos surface under test runs on: a fresh store, the node double over
// it, the registry deciding through the node, and the HTTP plumbing.
type Env struct {
	Store     *store.Store
	Node      *Node
	Registry  *registry.Registry
	Forwarder *httpx.Forwarder
	Metrics   *httpx.Metrics
}

// NewEnv is the Env of node id over a fresh store; leader is the member the node takes
// for the leader (itself when nil, and it then leads).
func NewEnv(t testing.TB, id string, leader *model.Member) Env {
	t.Helper()
	st := storetest.Open(t)
	node := &Node{id: id, leader: leader == nil, known: leader, ready: true, f: fsm.New(st, nil)}
	if leader == nil {
		node.known = &model.Member{ID: id, RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"}
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
	return Env{Store: st, Node: node, Registry: NewRegistry(t, st, node, false), Forwarder: fwd, Metrics: met}
}

// NewRegistry is a registry deciding through node over st, enforcing ACLs when
// aclEnabled is set.
func NewRegistry(t testing.TB, st *store.Store, node *Node, aclEnabled bool) *registry.Registry {
	t.Helper()
	cfg := registry.Config{Settings: st, Raft: node, RequestTimeout: 2 * time.Second}
	if aclEnabled {
		cfg.ACLEnabled, cfg.Tokens = true, st
	}
	reg, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// Response is a recorded answer.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Decode decodes the body into v.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// Envelope decodes a v2 answer.
func (r Response) Envelope(t testing.TB) (code int, message string, data json.RawMessage) {
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

// Do sends one Nacos request to h in process; a non-empty form is sent as an
// application/x-www-form-urlencoded body.
func Do(t testing.TB, h http.Handler, method, target, form string) Response {
	t.Helper()
	return As(t, h, method, target, form, "", "")
}

// As sends a Nacos request presenting token in the named place: "query" and "form"
// (accessToken), "header" (X-Roster-Token), "bearer" (Authorization), or "" for no
// token.
func As(t testing.TB, h http.Handler, method, target, form, place, token string) Response {
	t.Helper()
	switch place {
	case "query":
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "accessToken=" + url.QueryEscape(token)
	case "form":
		if form != "" {
			form += "&"
		}
		form += "accessToken=" + url.QueryEscape(token)
	}
	req := httptest.NewRequest(method, target, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch place {
	case "header":
		req.Header.Set("X-Roster-Token", token)
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return Response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// MustNacos sends a Nacos request and checks its status.
func MustNacos(t testing.TB, h http.Handler, method, target, form string, want int) Response {
	t.Helper()
	resp := Do(t, h, method, target, form)
	if resp.Code != want {
		t.Fatalf("%s %s %s: %d %s, want %d", method, target, form, resp.Code, resp.Body, want)
	}
	return resp
}

// MustOK sends a v1 write and checks it answered the text "ok".
func MustOK(t testing.TB, h http.Handler, method, target, form string) {
	t.Helper()
	resp := MustNacos(t, h, method, target, form, http.StatusOK)
	if string(resp.Body) != "ok" {
		t.Fatalf("%s %s: body %q, want ok", method, target, resp.Body)
	}
}

// MustInstance reads one instance from the store.
func MustInstance(t testing.TB, st *store.Store, ref model.InstanceRef) model.Instance {
	t.Helper()
	_, in, err := st.Instance(nil, ref)
	if err != nil {
		t.Fatalf("instance %+v: %v", ref, err)
	}
	return in
}

// SeedOrders registers the orders service's fixture through h: three instances of
// DEFAULT (127.100.0.1 healthy, .2 unhealthy, .3 disabled) and [::1]:9090 in a NONE
// cluster "manual".
func SeedOrders(t testing.TB, h http.Handler) {
	t.Helper()
	MustOK(t, h, http.MethodPost, "/nacos/v1/ns/service", "serviceName=orders")
	MustOK(t, h, http.MethodPut, "/nacos/v1/ns/cluster", `serviceName=orders&clusterName=manual&healthChecker={"type":"NONE"}`)
	for _, form := range []string{
		"ip=127.100.0.1&port=8080",
		"ip=127.100.0.2&port=8080&healthy=false",
		"ip=127.100.0.3&port=8080&enabled=false",
		"ip=::1&port=9090&clusterName=manual",
	} {
		MustOK(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ephemeral=false&"+form)
	}
}

// Token is a token of a test API: the login's username and password.
type Token struct {
	Accessor, Secret string
}

// Tokens are the tokens an ACL test API starts with: the management token, one that
// reads every namespace (and operator read), one that writes public and reads the rest,
// and one that writes only namespace dev.
type Tokens struct {
	Mgmt, Reader, PublicWriter, DevWriter Token
}

// NewToken commits a token to the node's state (the bootstrap when bootstrap is set)
// and returns its credentials.
func NewToken(t testing.TB, node *Node, rules acl.Rules, management, bootstrap bool) Token {
	t.Helper()
	accessor, err := acl.NewID()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := acl.NewID()
	if err != nil {
		t.Fatal(err)
	}
	tok := acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Description: "test", Rules: rules, Management: management}
	var cmd fsm.Command = fsm.CreateTokenRequest{Token: tok}
	if bootstrap {
		cmd = fsm.ACLBootstrapRequest{Token: tok}
	}
	if _, err := node.Apply(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	return Token{Accessor: accessor, Secret: secret}
}

// DeleteToken deletes a token from the node's state.
func DeleteToken(t testing.TB, node *Node, tok Token) {
	t.Helper()
	if _, err := node.Apply(context.Background(), fsm.DeleteTokenRequest{AccessorID: tok.Accessor}); err != nil {
		t.Fatal(err)
	}
}

// BootstrapTokens bootstraps ACLs on the node and creates the other tokens.
func BootstrapTokens(t testing.TB, node *Node) Tokens {
	t.Helper()
	return Tokens{
		Mgmt:         NewToken(t, node, acl.Rules{}, true, true),
		Reader:       NewToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"*": acl.Read}, Operator: acl.Read}, false, false),
		PublicWriter: NewToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"public": acl.Write, "*": acl.Read}}, false, false),
		DevWriter:    NewToken(t, node, acl.Rules{Namespaces: map[string]acl.Access{"dev": acl.Write}}, false, false),
	}
}

// SyncBuffer is a log sink tests read while the API writes to it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Counter is the value of the counter or gauge name in g with the given label pairs
// ("reason", "budget"); 0 when no such series was gathered.
func Counter(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
