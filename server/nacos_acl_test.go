package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
)

// nacosRoute is one Nacos request of the table, the permission it needs (as aclRoute's
// need) and the status its route answers a caller that has it.
type nacosRoute struct {
	method, path, form string
	need               string
	ok                 int
}

// nacosPlaces are the places a token is presented in: the accessToken parameter of the
// query string or of the form body, X-Roster-Token, Authorization: Bearer.
var nacosPlaces = []string{"query", "form", "header", "bearer"}

// nacosDo sends one Nacos request to addr with token (none when "") in place and
// returns the status, the body and the headers. A form body goes with every method.
func nacosDo(t *testing.T, addr, method, path, form, place, token string) (int, []byte, http.Header) {
	t.Helper()
	if token != "" {
		switch place {
		case "query":
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			path += sep + "accessToken=" + url.QueryEscape(token)
		case "form":
			if form != "" {
				form += "&"
			}
			form += "accessToken=" + url.QueryEscape(token)
		}
	}
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	}
	if token != "" {
		switch place {
		case "header":
			req.Header.Set(api.HeaderToken, token)
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// nacosRefusal reports whether an answer is Nacos's access-control refusal with msg:
// 403 with Spring's error body on v1 (as Nacos's AuthFilter answers), the envelope with
// code 10001 on v2.
func nacosRefusal(path string, code int, body []byte, msg string) bool {
	if code != http.StatusForbidden {
		return false
	}
	if strings.HasPrefix(path, "/nacos/v2/") {
		var env struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    string `json:"data"`
		}
		return json.Unmarshal(body, &env) == nil && env.Code == 10001 && env.Message == "access denied" && env.Data == msg
	}
	var e struct {
		Status  int    `json:"status"`
		Error   string `json:"error"`
		Message string `json:"message"`
		Path    string `json:"path"`
	}
	p, _, _ := strings.Cut(path, "?")
	return json.Unmarshal(body, &e) == nil && e.Status == 403 && e.Error == "Forbidden" && e.Message == msg && e.Path == p
}

// Every Nacos route on a 3-node cluster with ACLs, through the leader and through a
// follower: without a token, with an unknown one, and with one that lacks the route's
// permission (read for a write, another namespace, namespace rights on an operator
// route) it is refused in Nacos's shape by the node that received it, and the Raft log
// does not move; with a token that has the permission, in any of the places a token
// may be, it gets the route's own answer.
func TestNacosACL_EveryRoute(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 180*time.Second)
	leader := c.MustLeader()
	m := c.as(leader, c.mgmt)
	none := api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}
	if _, err := m.UpsertNamespace(ctx, "dev", api.NamespaceRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"public", "dev"} {
		if _, err := m.UpsertCluster(ctx, n, group, "svc", "DEFAULT", none); err != nil {
			t.Fatal(err)
		}
		if _, err := m.RegisterInstance(ctx, n, group, "svc", "127.0.0.1", 1, api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	tokens := []struct {
		name  string
		rules api.ACLRules
		tok   api.ACLToken
	}{
		{name: "read-everything", rules: api.ACLRules{Namespaces: map[string]string{"*": "read"}, Operator: "read"}},
		{name: "dev-writer", rules: api.ACLRules{Namespaces: map[string]string{"dev": "write"}}},
		{name: "public-writer", rules: api.ACLRules{Namespaces: map[string]string{"public": "write", "*": "read"}}},
	}
	for i := range tokens {
		tokens[i].tok = c.token(ctx, t, tokens[i].name, tokens[i].rules)
	}
	for i := range c.Nodes {
		for _, tk := range tokens {
			wait.For(t, 5*time.Second, c.Nodes[i].ID+" to know token "+tk.name, func() bool {
				_, err := c.as(i, tk.tok.SecretID).TokenSelf(ctx)
				return err == nil
			})
		}
	}

	const dev = "namespaceId=dev&serviceName=svc"
	routes := []nacosRoute{
		{"GET", "/nacos/v1/ns/instance/list?serviceName=svc", "", "ns:public:read", 200},
		{"GET", "/nacos/v1/ns/instance/list?" + dev + "&udpPort=0", "", "ns:dev:read", 200},
		{"GET", "/nacos/v2/ns/instance/list?" + dev, "", "ns:dev:read", 200},
		{"GET", "/nacos/v1/ns/instance?" + dev + "&ip=127.0.0.1&port=1", "", "ns:dev:read", 200},
		{"GET", "/nacos/v2/ns/instance?serviceName=svc&ip=127.0.0.1&port=1", "", "ns:public:read", 200},
		{"GET", "/nacos/v1/ns/service?" + dev, "", "ns:dev:read", 200},
		{"GET", "/nacos/v2/ns/service?serviceName=svc", "", "ns:public:read", 200},
		{"GET", "/nacos/v1/ns/service/list?namespaceId=dev&pageNo=1&pageSize=10", "", "ns:dev:read", 200},
		{"GET", "/nacos/v2/ns/service/list", "", "ns:public:read", 200},
		{"GET", "/nacos/v1/ns/service/subscribers?" + dev, "", "ns:dev:read", 200},
		{"GET", "/nacos/v1/ns/operator/switches", "", "operator:read", 200},
		{"GET", "/nacos/v2/ns/operator/switches", "", "operator:read", 200},
		{"GET", "/nacos/v1/ns/operator/metrics", "", "operator:read", 200},
		{"GET", "/nacos/v2/ns/operator/metrics", "", "operator:read", 200},
		{"GET", "/nacos/v1/ns/operator/servers", "", "operator:read", 200},
		{"GET", "/nacos/v1/ns/raft/leader", "", "operator:read", 200},
		// Refused whoever asks (read-only switches, no heartbeats, no batch metadata),
		// but only once the caller has the right.
		{"PUT", "/nacos/v1/ns/operator/switches", "entry=pushEnabled&value=false", "operator:write", 403},
		{"PUT", "/nacos/v1/ns/instance/beat", dev + "&ip=127.0.0.1&port=1", "ns:dev:write", 400},
		{"PUT", "/nacos/v2/ns/instance/metadata/batch", dev + "&instances=[]&metadata={}", "ns:dev:write", 400},
		// Writes, in an order that creates before it changes and deletes.
		{"POST", "/nacos/v1/ns/instance", dev + "&ip=127.0.0.1&port=2&ephemeral=false", "ns:dev:write", 200},
		{"PUT", "/nacos/v1/ns/instance", dev + "&ip=127.0.0.1&port=2&weight=2&ephemeral=false", "ns:dev:write", 200},
		{"PATCH", "/nacos/v2/ns/instance", dev + "&ip=127.0.0.1&port=2&weight=3", "ns:dev:write", 200},
		{"PUT", "/nacos/v1/ns/health/instance", dev + "&ip=127.0.0.1&port=2&healthy=false", "ns:dev:write", 200},
		{"PUT", "/nacos/v2/ns/health", dev + "&ip=127.0.0.1&port=2&healthy=true", "ns:dev:write", 200},
		{"DELETE", "/nacos/v1/ns/instance", dev + "&ip=127.0.0.1&port=2", "ns:dev:write", 200},
		{"POST", "/nacos/v2/ns/instance", "serviceName=svc&ip=127.0.0.1&port=3&ephemeral=false", "ns:public:write", 200},
		{"DELETE", "/nacos/v2/ns/instance", "serviceName=svc&ip=127.0.0.1&port=3", "ns:public:write", 200},
		{"POST", "/nacos/v1/ns/service", "namespaceId=dev&serviceName=other", "ns:dev:write", 200},
		{"PUT", "/nacos/v2/ns/service", "namespaceId=dev&serviceName=other&protectThreshold=0.5", "ns:dev:write", 200},
		{"PUT", "/nacos/v1/ns/cluster", `namespaceId=dev&serviceName=other&clusterName=c1&healthChecker={"type":"NONE"}`, "ns:dev:write", 200},
		{"DELETE", "/nacos/v2/ns/service", "namespaceId=dev&serviceName=other", "ns:dev:write", 200},
	}

	unknown := "00000000-0000-4000-8000-000000000000"
	n := 0
	place := func(method string) string {
		n++
		p := nacosPlaces[n%len(nacosPlaces)]
		if p == "form" && method == http.MethodGet {
			return "query"
		}
		return p
	}
	for _, rt := range routes {
		before := c.lastIndex()
		for _, via := range []int{leader, c.Followers()[0]} {
			nd := c.Nodes[via]
			refuse := func(who, token, msg string) {
				t.Helper()
				code, b, h := nacosDo(t, nd.HTTPAddr, rt.method, rt.path, rt.form, place(rt.method), token)
				if !nacosRefusal(rt.path, code, b, msg) {
					t.Errorf("%s %s %s with %s via %s: %d %s, want 403 %q", rt.method, rt.path, rt.form, who, nd.ID, code, b, msg)
				}
				if by := h.Get(api.HeaderServedBy); by != nd.ID {
					t.Errorf("%s %s with %s via %s: refused by %q, not by the node that received it", rt.method, rt.path, who, nd.ID, by)
				}
			}
			refuse("no token", "", "user not found!")
			refuse("an unknown token", unknown, "token invalid!")
			for _, tk := range tokens {
				if !grants(false, tk.rules, rt.need) {
					refuse(tk.name, tk.tok.SecretID, "authorization failed!")
				}
			}
		}
		if after := c.lastIndex(); after != before {
			t.Fatalf("refusals of %s %s moved the Raft log from %d to %d", rt.method, rt.path, before, after)
		}
	}

	// Granted: every token with the permission gets the route's answer through a
	// follower (forwarding carries the token) for reads; the management token through
	// the leader for every route, in the table's order.
	for _, rt := range routes {
		for _, tk := range tokens {
			if rt.method != http.MethodGet || !grants(false, tk.rules, rt.need) {
				continue
			}
			if code, b, _ := nacosDo(t, c.Nodes[c.Followers()[0]].HTTPAddr, rt.method, rt.path, rt.form, place(rt.method), tk.tok.SecretID); code != rt.ok {
				t.Errorf("%s %s as %s via a follower: %d %s, want %d", rt.method, rt.path, tk.name, code, b, rt.ok)
			}
		}
		code, b, _ := nacosDo(t, c.Nodes[c.MustLeader()].HTTPAddr, rt.method, rt.path, rt.form, place(rt.method), c.mgmt)
		if code != rt.ok || nacosRefusal(rt.path, code, b, "authorization failed!") {
			t.Errorf("%s %s %s with the management token: %d %s, want %d", rt.method, rt.path, rt.form, code, b, rt.ok)
		}
	}
	// A namespace writer's write through a follower, the token in each place.
	for i, p := range nacosPlaces {
		form := "namespaceId=dev&serviceName=svc&ephemeral=false&ip=127.0.0.2&port=" + strconv.Itoa(i+1)
		if code, b, _ := nacosDo(t, c.Nodes[c.Followers()[0]].HTTPAddr, "POST", "/nacos/v1/ns/instance", form, p, tokens[1].tok.SecretID); code != 200 || string(b) != "ok" {
			t.Fatalf("register in dev as the dev writer via a follower, token in the %s: %d %s", p, code, b)
		}
	}
	res, _, err := m.Instances(ctx, "dev", group, "svc", client.InstancesQuery{})
	if err != nil || len(res.Instances) != 1+len(nacosPlaces) {
		t.Fatalf("dev instances after the writes: %v %+v", err, res)
	}
}

// loginAnswer is the answer to a Nacos login.
type loginAnswer struct {
	AccessToken string `json:"accessToken"`
	TokenTTL    *int64 `json:"tokenTtl"`
	GlobalAdmin bool   `json:"globalAdmin"`
	Username    string `json:"username"`
}

// Nacos logins on a cluster with ACLs, answered by the node that receives them, leader
// or follower: a token's accessor id and secret log in (accessToken is the secret,
// globalAdmin for the management token), and the token answered works on every node;
// a wrong secret, or a secret with another token's accessor id, is Nacos's failed login;
// a deleted token no longer logs in.
func TestNacosACL_Login(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	self, err := c.as(c.MustLeader(), c.mgmt).TokenSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader := c.token(ctx, t, "reader", api.ACLRules{Namespaces: map[string]string{"public": "read"}})
	login := func(i int, path, user, pass string) (int, []byte) {
		t.Helper()
		code, b, _ := nacosDo(t, c.Nodes[i].HTTPAddr, "POST", path, "username="+url.QueryEscape(user)+"&password="+url.QueryEscape(pass), "", "")
		return code, b
	}
	// Every node knows both tokens before any is used on another node than the one
	// that logged in.
	for i := range c.Nodes {
		for _, tk := range [][2]string{{self.AccessorID, c.mgmt}, {reader.AccessorID, reader.SecretID}} {
			wait.For(t, 5*time.Second, c.Nodes[i].ID+" to log "+tk[0]+" in", func() bool {
				code, _ := login(i, "/nacos/v1/auth/users/login", tk[0], tk[1])
				return code == http.StatusOK
			})
		}
	}
	for i := range c.Nodes {
		for _, path := range []string{"/nacos/v1/auth/login", "/nacos/v1/auth/users/login"} {
			for _, tc := range []struct {
				accessor, secret string
				admin            bool
			}{{self.AccessorID, c.mgmt, true}, {reader.AccessorID, reader.SecretID, false}} {
				code, b := login(i, path, tc.accessor, tc.secret)
				var got loginAnswer
				if code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.AccessToken != tc.secret || got.TokenTTL == nil || *got.TokenTTL <= 0 ||
					got.GlobalAdmin != tc.admin || got.Username != tc.accessor {
					t.Fatalf("login of %s at %s on %s: %d %s", tc.accessor, path, c.Nodes[i].ID, code, b)
				}
				// The token answered is the one every route takes.
				if code, b, _ := nacosDo(t, c.Nodes[(i+1)%len(c.Nodes)].HTTPAddr, "GET", "/nacos/v1/ns/instance/list?serviceName=svc", "", "query", got.AccessToken); code != 200 {
					t.Fatalf("a read with the login's token: %d %s", code, b)
				}
			}
			for name, cred := range map[string][2]string{
				"a wrong secret":              {reader.AccessorID, "00000000-0000-4000-8000-000000000000"},
				"another token's accessor id": {self.AccessorID, reader.SecretID},
				"no secret":                   {reader.AccessorID, ""},
			} {
				if code, b := login(i, path, cred[0], cred[1]); code != http.StatusForbidden || string(b) != "user not found!" {
					t.Fatalf("login with %s at %s on %s: %d %s, want 403 user not found!", name, path, c.Nodes[i].ID, code, b)
				}
			}
		}
	}
	if _, err := c.as(c.MustLeader(), c.mgmt).DeleteToken(ctx, reader.AccessorID); err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		wait.For(t, 5*time.Second, c.Nodes[i].ID+" to refuse the deleted token's login", func() bool {
			code, b := login(i, "/nacos/v1/auth/login", reader.AccessorID, reader.SecretID)
			return code == http.StatusForbidden && string(b) == "user not found!"
		})
	}
}

// A node started without --acl-enabled in a cluster with ACLs serves no Nacos route,
// login included (503), and writes nothing.
func TestNacosACL_NodeWithoutTheFlagServesNothing(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	f := c.Followers()[0]
	c.Stop(f)
	c.Configure(f, func(cfg *server.Config) { cfg.ACLEnabled = false })
	c.Start(f)
	wait.For(t, 10*time.Second, "the node without ACLs to see the bootstrap", func() bool {
		_, _, err := c.Nodes[f].Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{})
		var ae *client.APIError
		return errors.As(err, &ae) && ae.Code == api.CodeACLMismatch
	})
	before := c.lastIndex()
	for _, rq := range []struct{ method, path, form string }{
		{"GET", "/nacos/v1/ns/instance/list?serviceName=svc", ""},
		{"POST", "/nacos/v1/ns/instance", "serviceName=svc&ip=127.0.0.1&port=9&ephemeral=false"},
		{"POST", "/nacos/v2/ns/instance", "serviceName=svc&ip=127.0.0.1&port=9&ephemeral=false"},
		{"POST", "/nacos/v1/auth/login", "username=a&password=b"},
	} {
		if code, b, _ := nacosDo(t, c.Nodes[f].HTTPAddr, rq.method, rq.path, rq.form, "query", c.mgmt); code != http.StatusServiceUnavailable {
			t.Errorf("%s %s on the node without ACLs: %d %s, want 503", rq.method, rq.path, code, b)
		}
	}
	if after := c.lastIndex(); after != before {
		t.Fatalf("the node without ACLs moved the Raft log from %d to %d", before, after)
	}
}
