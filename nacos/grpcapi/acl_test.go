package grpcapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/nacos/internal/nacostesting"
	"github.com/rosterhq/roster/nacos/nacospb"
	"github.com/rosterhq/roster/nacos/openapi"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// callAs sends a unary gRPC request presenting token in the accessToken header ("" for
// none), as nacos-sdk-go v2 does once logged in.
func (c *rpcClient) callAs(token, typ string, body any) (string, map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	md := &nacospb.Metadata{Type: typ, ClientIp: "192.0.2.7", Headers: map[string]string{"app": "test"}}
	if token != "" {
		md.Headers[nacos.AccessTokenParam] = token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := nacospb.Call(ctx, c.cc, &nacospb.Payload{Metadata: md, Body: &anypb.Any{Value: b}})
	if err != nil {
		c.t.Fatalf("%s: %v", typ, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.GetBody().GetValue(), &m); err != nil {
		c.t.Fatalf("%s answered %q: %v", typ, out.GetBody().GetValue(), err)
	}
	return out.GetMetadata().GetType(), m
}

// TestGRPC_ACL: with ACLs on, the connection lifecycle (ServerCheck, setup, health
// checks) needs no token; every naming request resolves its accessToken header and
// needs read or write access to its namespace (ServerLoaderInfo operator read); a
// refusal is the request's own response type with resultCode 500, errorCode 403 and
// Nacos's text, and changes nothing: no entry applied, no subscription made.
func TestGRPC_ACL(t *testing.T) {
	e, tok := newACLEnv(t, nil)
	h, st, node := e.h, e.st, e.node
	c := e.connect(false)
	typ, m := c.callAs("", rpcHealthCheckRequest, map[string]any{"module": "internal"})
	result(t, typ, m, rpcHealthCheckResponse, 200, 0)

	if resp := nacostesting.As(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&port=8080&ephemeral=false", "form", tok.Mgmt.Secret); resp.Code != http.StatusOK {
		t.Fatalf("fixture: %d %s", resp.Code, resp.Body)
	}
	inst := map[string]any{"ip": "127.100.0.9", "port": 8080, "weight": 1.0, "healthy": true, "enabled": true, "ephemeral": false, "clusterName": "DEFAULT"}
	write := func(op string) map[string]any {
		return naming("orders", map[string]any{"type": op, "instance": inst})
	}
	requests := []struct {
		typ, resp string
		body      map[string]any
		write     bool
	}{
		{rpcServiceQueryRequest, rpcQueryServiceResponse, naming("orders", map[string]any{"cluster": "", "healthyOnly": false}), false},
		{rpcSubscribeServiceRequest, rpcSubscribeServiceResponse, naming("orders", map[string]any{"subscribe": true, "clusters": ""}), false},
		{rpcSubscribeServiceRequest, rpcSubscribeServiceResponse, naming("orders", map[string]any{"subscribe": false, "clusters": ""}), false},
		{rpcServiceListRequest, rpcServiceListResponse, naming("", map[string]any{"pageNo": 1, "pageSize": 10}), false},
		{rpcPersistentInstanceRequest, rpcInstanceResponse, write("registerInstance"), true},
		{rpcPersistentInstanceRequest, rpcInstanceResponse, write("deregisterInstance"), true},
		{rpcInstanceRequest, rpcInstanceResponse, write("deregisterInstance"), true},
		{rpcBatchInstanceRequest, rpcBatchInstanceResponse, naming("orders", map[string]any{"type": "batchRegisterInstance", "instances": []any{inst}}), true},
	}
	applied := len(node.Applied())
	unknown, _ := acl.NewID()
	for _, rq := range requests {
		refusals := []struct{ who, token, msg string }{
			{"no token", "", "user not found!"},
			{"an unknown token", unknown, "token invalid!"},
			{"a token for dev only", tok.DevWriter.Secret, "authorization failed!"},
		}
		if rq.write {
			refusals = append(refusals, struct{ who, token, msg string }{"a read token", tok.Reader.Secret, "authorization failed!"})
		}
		for _, rf := range refusals {
			typ, m := c.callAs(rf.token, rq.typ, rq.body)
			result(t, typ, m, rq.resp, 500, 403)
			if m["message"] != rf.msg || m["success"] != false {
				t.Fatalf("%s with %s: %v, want message %q", rq.typ, rf.who, m, rf.msg)
			}
		}
	}
	if got := len(node.Applied()); got != applied {
		t.Fatalf("refused requests applied %d entries", got-applied)
	}
	if n := testutil.ToFloat64(e.g.m.subscriptions); n != 0 {
		t.Fatalf("%v subscriptions after refused subscribes", n)
	}
	// In its own namespace the dev writer passes the check (the answer is the request's
	// own: a list, or a write's outcome).
	for _, rq := range requests {
		body := map[string]any{}
		for k, v := range rq.body {
			body[k] = v
		}
		body["namespace"] = "dev"
		if typ, m := c.callAs(tok.DevWriter.Secret, rq.typ, body); typ != rq.resp || num(m["errorCode"]) == 403 {
			t.Fatalf("%s in dev by the dev writer: %s %v", rq.typ, typ, m)
		}
	}
	typ, m = c.callAs(tok.DevWriter.Secret, rpcServerLoaderInfoRequest, map[string]any{})
	result(t, typ, m, rpcServerLoaderInfoResponse, 500, 403)
	typ, m = c.callAs(tok.Reader.Secret, rpcServerLoaderInfoRequest, map[string]any{})
	result(t, typ, m, rpcServerLoaderInfoResponse, 200, 0)

	// Allowed: the reader queries, the public writer registers and deregisters.
	typ, m = c.callAs(tok.Reader.Secret, rpcServiceQueryRequest, requests[0].body)
	result(t, typ, m, rpcQueryServiceResponse, 200, 0)
	if hosts := hostsOf(t, m["serviceInfo"]); len(hosts) != 1 {
		t.Fatalf("query by a reader: %v", m)
	}
	ref := model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.9", Port: 8080}
	typ, m = c.callAs(tok.PublicWriter.Secret, rpcPersistentInstanceRequest, requests[4].body)
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	nacostesting.MustInstance(t, st, ref)
	typ, m = c.callAs(tok.PublicWriter.Secret, rpcPersistentInstanceRequest, requests[5].body)
	result(t, typ, m, rpcInstanceResponse, 200, 0)
	if _, _, err := st.Instance(nil, ref); err == nil {
		t.Fatal("the instance is still registered")
	}
}

// TestGRPC_ACLSubscriptionEndsWithItsToken: a subscription is pushed while its token
// grants read access; once the token is deleted, the next change ends it instead of
// being pushed.
func TestGRPC_ACLSubscriptionEndsWithItsToken(t *testing.T) {
	e, tok := newACLEnv(t, nil)
	h, node := e.h, e.node
	reg := func(port string) {
		t.Helper()
		if resp := nacostesting.As(t, h, http.MethodPost, "/nacos/v1/ns/instance", "serviceName=orders&ip=127.100.0.1&ephemeral=false&port="+port, "form", tok.Mgmt.Secret); resp.Code != http.StatusOK {
			t.Fatalf("register: %d %s", resp.Code, resp.Body)
		}
	}
	reg("1")
	c := e.connect(false)
	typ, m := c.callAs(tok.Reader.Secret, rpcSubscribeServiceRequest, naming("orders", map[string]any{"subscribe": true, "clusters": ""}))
	result(t, typ, m, rpcSubscribeServiceResponse, 200, 0)
	reg("2")
	if _, hosts := c.pushed(5*time.Second, 200); len(hosts) != 2 {
		t.Fatalf("push: %v", hosts)
	}
	wait.For(t, 5*time.Second, "the ack", func() bool { return testutil.ToFloat64(e.g.m.pushes.WithLabelValues("acked")) == 1 })

	nacostesting.DeleteToken(t, node, tok.Reader)
	reg("3")
	wait.For(t, 5*time.Second, "the subscription of the deleted token to end", func() bool {
		return testutil.ToFloat64(e.g.m.subscriptions) == 0
	})
	if n := testutil.ToFloat64(e.g.m.pushes.WithLabelValues("sent")); n != 1 {
		t.Fatalf("%v pushes sent, want the one before the deletion", n)
	}
}

// TestNacosACL_NodeWithoutACLsServesNothing: a node without ACLs whose state holds a
// bootstrapped cluster's tokens (its operators turned ACLs on elsewhere) serves no Nacos
// request, login included (503), and answers every gRPC request but ServerCheck with
// the ErrorResponse that sends clients to another server.
func TestNacosACL_NodeWithoutACLsServesNothing(t *testing.T) {
	e := newGRPCEnvWith(t, func(st *store.Store, cfg *openapi.Config) {
		reg, err := registry.New(registry.Config{Settings: st, Raft: cfg.Node.(*nacostesting.Node), RequestTimeout: 2 * time.Second, Tokens: st})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Registry = reg
	}, nil)
	h, node := e.h, e.node
	c := e.connect(false)
	tok := nacostesting.NewToken(t, node, acl.Rules{}, true, true)
	applied := len(node.Applied())
	for _, rq := range []struct{ method, path, form string }{
		{http.MethodGet, "/nacos/v1/ns/instance/list?serviceName=orders", ""},
		{http.MethodPost, "/nacos/v2/ns/instance", "serviceName=orders&ip=127.0.0.1&port=1&ephemeral=false"},
		{http.MethodPost, "/nacos/v1/auth/login", "username=" + tok.Accessor + "&password=" + tok.Secret},
	} {
		if resp := nacostesting.As(t, h, rq.method, rq.path, rq.form, "form", tok.Secret); resp.Code != http.StatusServiceUnavailable ||
			!strings.Contains(string(resp.Body), "acl_mismatch") || !strings.Contains(string(resp.Body), "--acl-enabled") {
			t.Errorf("%s %s on a node without ACLs: %d %s, want 503 acl_mismatch", rq.method, rq.path, resp.Code, resp.Body)
		}
	}
	for _, typ := range []string{rpcHealthCheckRequest, rpcServiceQueryRequest, rpcPersistentInstanceRequest} {
		typ, m := c.callAs(tok.Secret, typ, naming("orders", map[string]any{"type": "registerInstance", "instance": map[string]any{"ip": "127.0.0.1", "port": 1}}))
		result(t, typ, m, rpcErrorResponse, 500, rpcCodeInvalidServerStatus)
	}
	typ, m := c.callAs("", rpcServerCheckRequest, map[string]any{"module": "internal"})
	result(t, typ, m, rpcServerCheckResponse, 200, 0)
	if got := len(node.Applied()); got != applied {
		t.Fatalf("a node without ACLs applied %d entries", got-applied)
	}
}
