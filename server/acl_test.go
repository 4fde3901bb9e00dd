package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// aclCluster is a 3-node cluster with ACLs on and bootstrapped; mgmt is the management
// token's secret.
type aclCluster struct {
	*servertest.Cluster
	mgmt string
}

func newACLCluster(t *testing.T, opts ...servertest.Option) *aclCluster {
	t.Helper()
	c := servertest.New(t, 3, append([]servertest.Option{servertest.FastTimeouts(), servertest.WithACL()}, opts...)...)
	c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	// Before the bootstrap every request but the bootstrap and the status routes is 401.
	_, _, err := c.Nodes[0].Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{})
	if !client.IsUnauthenticated(err) || !strings.Contains(err.Error(), "bootstrap") {
		t.Fatalf("a read before the bootstrap: %v, want 401 saying to bootstrap", err)
	}
	tok, err := c.Nodes[c.Followers()[0]].Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatalf("bootstrap through a follower: %v", err)
	}
	if !tok.Management || tok.SecretID == "" || tok.AccessorID == "" {
		t.Fatalf("bootstrap token %+v", tok)
	}
	if _, err := c.Nodes[c.MustLeader()].Client().ACLBootstrap(ctx); !client.IsConflict(err) {
		t.Fatalf("second bootstrap: %v, want 409", err)
	}
	// Tests compare the log before and after refusals: the leader's identity, its first
	// write of its own, is set by then. (Without TLS or a join token the servers cannot
	// announce themselves to an ACL cluster, so there are no member records to wait for.)
	wait.For(t, 20*time.Second, "the cluster's identity on every node", func() bool {
		for _, nd := range c.Nodes {
			if nd.Running() && nd.Server.Node().ClusterID() == "" {
				return false
			}
		}
		return true
	})
	return &aclCluster{Cluster: c, mgmt: tok.SecretID}
}

// as returns a client of node i presenting secret.
func (c *aclCluster) as(i int, secret string) *client.Client {
	opts := []client.Option{client.WithToken(secret)}
	if c.TLS != nil {
		opts = append(opts, client.WithTLSConfig(c.TLS.Client))
	}
	return client.New(c.Nodes[i].HTTPAddr, opts...)
}

// token creates a token with rules and returns its secret.
func (c *aclCluster) token(ctx context.Context, t *testing.T, desc string, rules api.ACLRules) api.ACLToken {
	t.Helper()
	tok, err := c.as(c.MustLeader(), c.mgmt).CreateToken(ctx, api.ACLTokenRequest{Description: desc, Rules: rules})
	if err != nil {
		t.Fatalf("create token %q: %v", desc, err)
	}
	if tok.SecretID == "" {
		t.Fatalf("token %q created without a secret in the answer", desc)
	}
	return tok
}

// lastIndex is the leader's last Raft log index.
func (c *aclCluster) lastIndex() uint64 {
	return c.Nodes[c.MustLeader()].Server.Node().Raft().LastIndex()
}

// rawDo sends one request with the token secret in X-Roster-Token (none when "") and
// returns the status and body.
// tokenSecret creates a token with rules through m and returns its secret.
func tokenSecret(ctx context.Context, t *testing.T, m *client.Client, rules api.ACLRules) string {
	t.Helper()
	tok, err := m.CreateToken(ctx, api.ACLTokenRequest{Description: "test token", Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return tok.SecretID
}

func rawDo(t *testing.T, addr, secret, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set(api.HeaderToken, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// errorCode is the code of an error body ("" when it is none).
func errorCode(b []byte) string {
	var e api.ErrorBody
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// aclRoute is one request of the table and the permission it needs.
type aclRoute struct {
	method, path, body string
	// need is "anon", "auth" (any valid token), "ns:<ns>:read|write", "operator:read|write"
	// or "acl:read|write".
	need string
}

// grants reports whether a token with rules (mgmt: a management token) may do need.
func grants(mgmt bool, rules api.ACLRules, need string) bool {
	if need == "anon" || need == "auth" || mgmt {
		return true
	}
	level := func(have, want string) bool {
		rank := map[string]int{"": 0, "none": 0, "read": 1, "write": 2}
		return rank[have] >= rank[want]
	}
	parts := strings.Split(need, ":")
	switch parts[0] {
	case "ns":
		have, ok := rules.Namespaces[parts[1]]
		if !ok {
			have = rules.Namespaces["*"]
		}
		return level(have, parts[2])
	case "operator":
		return level(rules.Operator, parts[1])
	case "acl":
		return level(rules.ACL, parts[1])
	}
	panic("unknown need " + need)
}

// permissionText is how an error body names the permission need stands for.
func permissionText(need string) string {
	p := strings.Split(need, ":")
	if p[0] == "ns" {
		return fmt.Sprintf(`namespace \"%s\": %s`, p[1], p[2])
	}
	return p[0] + ": " + p[1]
}

// Every route family with ACLs on, through the leader and through a follower: without a
// token 401, with a token that lacks the permission 403 naming it, with one that has it
// the route's normal answer; no refusal moves the Raft log.
func TestACL_EveryRouteFamily(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 120*time.Second)
	leader := c.MustLeader()
	m := c.as(leader, c.mgmt)
	// Fixtures: namespace dev, a service in public and in dev with NONE health checks and
	// an instance each, a ghost member to remove.
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

	readAll := api.ACLRules{Namespaces: map[string]string{"*": "read"}, Operator: "read", ACL: "read"}
	devWriter := api.ACLRules{Namespaces: map[string]string{"dev": "write"}}
	publicWriter := api.ACLRules{Namespaces: map[string]string{"public": "write", "*": "read"}}
	tokens := []struct {
		name  string
		rules api.ACLRules
		tok   api.ACLToken
	}{
		{name: "read-everything", rules: readAll},
		{name: "dev-writer", rules: devWriter},
		{name: "public-writer", rules: publicWriter},
	}
	for i := range tokens {
		tokens[i].tok = c.token(ctx, t, tokens[i].name, tokens[i].rules)
	}
	victim := c.token(ctx, t, "to be deleted", api.ACLRules{})
	// An archive of the state as it is now: the table restores it, so a refused restore
	// is refused for want of the permission, not for a bad body.
	var archive bytes.Buffer
	if _, err := m.SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}

	svc := "/v1/namespaces/%s/groups/DEFAULT_GROUP/services/svc"
	routes := []aclRoute{
		{"GET", "/v1/status/ready", "", "anon"},
		{"GET", "/v1/status/leader", "", "anon"},
		{"GET", "/metrics", "", "anon"},
		{"GET", "/v1/acl/token/self", "", "auth"},
		{"GET", "/v1/namespaces", "", "auth"},
		{"GET", "/v1/namespaces/dev", "", "ns:dev:read"},
		{"GET", "/v1/namespaces/dev/services", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev"), "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev") + "/instances", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev") + "/instances/127.0.0.1:1", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev") + "/clusters", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev") + "/clusters/DEFAULT", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "dev") + "/health", "", "ns:dev:read"},
		{"GET", fmt.Sprintf(svc, "public") + "/instances", "", "ns:public:read"},
		{"PUT", fmt.Sprintf(svc, "dev") + "/instances/127.0.0.1:2", `{}`, "ns:dev:write"},
		{"PATCH", fmt.Sprintf(svc, "dev") + "/instances/127.0.0.1:2", `{"weight":2}`, "ns:dev:write"},
		{"PUT", fmt.Sprintf(svc, "dev") + "/instances/127.0.0.1:2/health", `{"healthy":false}`, "ns:dev:write"},
		{"DELETE", fmt.Sprintf(svc, "dev") + "/instances/127.0.0.1:2", "", "ns:dev:write"},
		{"PUT", fmt.Sprintf(svc, "public") + "/instances/127.0.0.1:3", `{}`, "ns:public:write"},
		{"DELETE", fmt.Sprintf(svc, "public") + "/instances/127.0.0.1:3", "", "ns:public:write"},
		{"PUT", "/v1/namespaces/dev/groups/DEFAULT_GROUP/services/other", `{}`, "ns:dev:write"},
		{"PUT", "/v1/namespaces/dev/groups/DEFAULT_GROUP/services/other/clusters/DEFAULT", `{"healthCheck":{"type":"NONE"}}`, "ns:dev:write"},
		{"DELETE", "/v1/namespaces/dev/groups/DEFAULT_GROUP/services/other", "", "ns:dev:write"},
		{"PUT", "/v1/namespaces/staging", `{}`, "operator:write"},
		{"DELETE", "/v1/namespaces/staging", "", "operator:write"},
		{"GET", "/v1/cluster/members", "", "operator:read"},
		{"GET", "/v1/operator/settings", "", "operator:read"},
		{"GET", "/v1/operator/probe-policy", "", "operator:read"},
		{"GET", "/v1/operator/autopilot/health", "", "operator:read"},
		{"PUT", "/v1/operator/settings", `{"metadataMaxBytes":2048}`, "operator:write"},
		{"POST", "/v1/cluster/join", `{"id":"ghost","raftAddr":"127.0.0.1:9","httpAddr":"127.0.0.1:9","nonVoter":true}`, "operator:write"},
		{"POST", "/v1/cluster/probe", `{"check":{"type":"TCP","interval":"1s","timeout":"100ms","rise":1,"fall":1},"ip":"127.0.0.1","port":1}`, "operator:write"},
		{"DELETE", "/v1/cluster/members/ghost", "", "operator:write"},
		{"GET", "/v1/snapshot", "", "operator:write"},
		{"PUT", "/v1/snapshot", archive.String(), "operator:write"},
		{"GET", "/v1/acl/tokens", "", "acl:read"},
		{"GET", "/v1/acl/tokens/" + victim.AccessorID, "", "acl:read"},
		{"POST", "/v1/acl/tokens", `{"description":"made in the table","rules":{"operator":"read"}}`, "acl:write"},
		{"DELETE", "/v1/acl/tokens/" + victim.AccessorID, "", "acl:write"},
		// Last: granted, it moves the leader.
		{"POST", "/v1/cluster/leadership-transfer", "", "operator:write"},
	}

	// Refusals first: none of them may write anything, nor move the leader.
	before, leaderBefore := c.lastIndex(), c.Nodes[leader].ID
	for _, via := range []int{leader, c.Followers()[0]} {
		addr := c.Nodes[via].HTTPAddr
		for _, rt := range routes {
			if rt.need == "anon" {
				if code, b := rawDo(t, addr, "", rt.method, rt.path, rt.body); code != http.StatusOK {
					t.Errorf("%s %s without a token via %s: %d %s, want 200 (anonymous route)", rt.method, rt.path, c.Nodes[via].ID, code, b)
				}
				continue
			}
			for _, secret := range []string{"", "00000000-0000-4000-8000-000000000000"} {
				code, b := rawDo(t, addr, secret, rt.method, rt.path, rt.body)
				if code != http.StatusUnauthorized || errorCode(b) != api.CodeUnauthenticated {
					t.Errorf("%s %s with token %q via %s: %d %s, want 401 unauthenticated", rt.method, rt.path, secret, c.Nodes[via].ID, code, b)
				}
			}
			for _, tk := range tokens {
				if grants(false, tk.rules, rt.need) {
					continue
				}
				code, b := rawDo(t, addr, tk.tok.SecretID, rt.method, rt.path, rt.body)
				if code != http.StatusForbidden || errorCode(b) != api.CodePermissionDenied || !strings.Contains(string(b), permissionText(rt.need)) {
					t.Errorf("%s %s as %s via %s: %d %s, want 403 permission_denied naming %s", rt.method, rt.path, tk.name, c.Nodes[via].ID, code, b, rt.need)
				}
			}
		}
	}
	if after := c.lastIndex(); after != before {
		t.Fatalf("refused requests moved the Raft log from %d to %d", before, after)
	}
	if l := c.MustLeader(); c.Nodes[l].ID != leaderBefore {
		t.Fatalf("refused requests moved leadership from %s to %s", leaderBefore, c.Nodes[l].ID)
	}

	// Granted: every token with the permission gets the route's answer (2xx), through a
	// follower (forwarding carries the token) for tokens, through the leader for the
	// management token, in the table's order (which creates before it deletes).
	for _, rt := range routes {
		for _, tk := range tokens {
			if !grants(false, tk.rules, rt.need) || rt.method != "GET" || rt.path == "/v1/snapshot" {
				continue // the writes run once, with the management token, below
			}
			code, b := rawDo(t, c.Nodes[c.Followers()[0]].HTTPAddr, tk.tok.SecretID, rt.method, rt.path, rt.body)
			if code/100 != 2 {
				t.Errorf("%s %s as %s via a follower: %d %s, want 2xx", rt.method, rt.path, tk.name, code, b)
			}
		}
		code, b := rawDo(t, c.Nodes[c.MustLeader()].HTTPAddr, c.mgmt, rt.method, rt.path, rt.body)
		if code/100 != 2 {
			t.Errorf("%s %s with the management token: %d %s, want 2xx", rt.method, rt.path, code, b)
		}
	}

	// A token scoped to one namespace sees only that namespace in lists.
	res, _, err := c.as(c.Followers()[0], tokens[1].tok.SecretID).Namespaces(ctx, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Namespaces) != 1 || res.Namespaces[0].ID != "dev" {
		t.Fatalf("namespaces listed for a token scoped to dev: %+v", res.Namespaces)
	}
	// The deleted token is refused everywhere within a second.
	for i := range c.Nodes {
		wait.For(t, time.Second, c.Nodes[i].ID+" to refuse the deleted token", func() bool {
			_, err := c.as(i, victim.SecretID).TokenSelf(ctx)
			return client.IsUnauthenticated(err)
		})
	}
}

// Tokens live in the replicated state: every node knows a new one, they survive a
// restart of the whole cluster and a snapshot restore, and a deletion takes effect on
// every node within a second. Secrets are stored only as hashes.
func TestACL_TokensReplicateSurviveRestartAndRestore(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 120*time.Second)
	tok := c.token(ctx, t, "reader", api.ACLRules{Namespaces: map[string]string{"*": "read"}})
	for i := range c.Nodes {
		wait.For(t, 5*time.Second, c.Nodes[i].ID+" to know the new token", func() bool {
			_, err := c.as(i, tok.SecretID).TokenSelf(ctx)
			return err == nil
		})
	}
	// No secret in any state file: only its hash.
	for _, nd := range c.Nodes {
		st, err := nd.Server.Store().Dump()
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(st)
		if bytes.Contains(raw, []byte(tok.SecretID)) || bytes.Contains(raw, []byte(c.mgmt)) {
			t.Fatalf("%s: the state holds a secret", nd.ID)
		}
		if len(st.Tokens) != 2 {
			t.Fatalf("%s holds %d tokens, want 2", nd.ID, len(st.Tokens))
		}
	}

	// A snapshot taken now, restored after the token was deleted with the archive's
	// tokens (?acl=archive, the management token), brings it back.
	var archive bytes.Buffer
	if _, err := c.as(c.MustLeader(), c.mgmt).SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}

	for i := range c.Nodes {
		c.Stop(i)
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	c.MustLeader()
	for i := range c.Nodes {
		wait.For(t, 10*time.Second, c.Nodes[i].ID+" to know the token after a restart", func() bool {
			_, err := c.as(i, tok.SecretID).TokenSelf(ctx)
			return err == nil
		})
	}

	if _, err := c.as(c.MustLeader(), c.mgmt).DeleteToken(ctx, tok.AccessorID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range c.Nodes {
		wait.For(t, time.Second, c.Nodes[i].ID+" to refuse the deleted token", func() bool {
			_, _, err := c.as(i, tok.SecretID).Instances(ctx, ns, group, "svc", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
			return client.IsUnauthenticated(err)
		})
	}
	t.Logf("the deletion took effect on every node after %v", time.Since(start).Round(time.Millisecond))

	if _, err := c.as(c.MustLeader(), c.mgmt).RestoreSnapshotWith(ctx, bytes.NewReader(archive.Bytes()),
		client.RestoreOptions{ACL: api.RestoreACLArchive}); err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		wait.For(t, 10*time.Second, c.Nodes[i].ID+" to know the token again after the restore", func() bool {
			_, err := c.as(i, tok.SecretID).TokenSelf(ctx)
			return err == nil
		})
	}
}

// A node started without --acl-enabled in a cluster whose ACLs are bootstrapped serves
// nothing (503 acl_mismatch) and is not ready, saying why; restarted with the flag it
// serves again.
func TestACL_NodeWithoutTheFlagRefusesToServe(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	f := c.Followers()[0]
	c.Stop(f)
	c.Configure(f, func(cfg *server.Config) { cfg.ACLEnabled = false })
	c.Start(f)
	wait.For(t, 10*time.Second, "the node without ACLs to see the bootstrap", func() bool {
		r, err := c.Nodes[f].Client().Ready(ctx)
		return err == nil && !r.Ready && strings.Contains(r.Reason, "--acl-enabled")
	})
	_, _, err := c.Nodes[f].Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeACLMismatch {
		t.Fatalf("a read from a node without ACLs in an ACL cluster: %v, want 503 acl_mismatch", err)
	}
	if _, err := c.Nodes[f].Client().RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", 9, api.InstanceRequest{}); !errors.As(err, &ae) || ae.Code != api.CodeACLMismatch {
		t.Fatalf("a write through a node without ACLs: %v, want 503 acl_mismatch", err)
	}
	c.Stop(f)
	c.Configure(f, func(cfg *server.Config) { cfg.ACLEnabled = true })
	c.Start(f)
	wait.For(t, 10*time.Second, "the node to serve again with --acl-enabled", func() bool {
		_, _, err := c.as(f, c.mgmt).Instances(ctx, ns, group, "svc", client.InstancesQuery{})
		return err == nil || client.IsNotFound(err)
	})
}

// The bootstrap needs a node with ACLs enabled: on a cluster without them it is a 400
// and nothing is written.
func TestACL_BootstrapNeedsACLs(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	_, err := c.Nodes[0].Client().ACLBootstrap(ctx)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "--acl-enabled") {
		t.Fatalf("bootstrap without ACLs: %v, want 400 naming --acl-enabled", err)
	}
	if st, err := c.Nodes[0].Server.Store().ACLState(); err != nil || st.Bootstrapped() {
		t.Fatalf("ACL state after a refused bootstrap: %+v, %v", st, err)
	}
}

// An archive taken before ACLs existed, restored into a cluster with ACLs, leaves the
// cluster's tokens in place: nobody can bootstrap it again, and the management token
// still works.
func TestACL_RestoreOfAnArchiveWithoutACLsKeepsTheTokens(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	open := servertest.New(t, 1, servertest.FastTimeouts())
	register(ctx, t, open.Nodes[open.MustLeader()].Client(), "from-the-archive", "127.0.0.1", 7)
	var archive bytes.Buffer
	if _, err := open.Nodes[0].Client().SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}

	c := newACLCluster(t)
	if err := c.as(c.MustLeader(), c.mgmt).RestoreSnapshot(ctx, bytes.NewReader(archive.Bytes())); err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		wait.For(t, 10*time.Second, c.Nodes[i].ID+" to serve the restored state with the old token", func() bool {
			res, _, err := c.as(i, c.mgmt).Instances(ctx, ns, group, "from-the-archive", client.InstancesQuery{
				QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
			return err == nil && len(res.Instances) == 1
		})
	}
	if _, err := c.Nodes[0].Client().ACLBootstrap(ctx); !client.IsConflict(err) {
		t.Fatalf("bootstrap after restoring an archive without ACLs: %v, want 409", err)
	}
}

// With ACLs and TLS, nodes authenticate each other by certificate: every member's
// addresses are recorded (followers announce them to the leader without a token), and a
// new node joins with its certificate alone. Clients still need a token.
func TestACL_WithTLSNodesJoinByCertificate(t *testing.T) {
	c := newACLCluster(t, servertest.WithTLS())
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	mgmt := c.as(leader, c.mgmt)
	wait.For(t, 20*time.Second, "every member's addresses to be recorded", func() bool {
		res, _, err := mgmt.Members(ctx, client.QueryOptions{})
		if err != nil || len(res.Members) != 3 {
			return false
		}
		for _, m := range res.Members {
			if m.HTTPAddr == "" {
				return false
			}
		}
		return true
	})
	s := startJoiner(t, "n4", c.Nodes[c.Followers()[0]].HTTPAddr, c.TLS.NodeConfig("n4"), nil)
	wait.For(t, 30*time.Second, "n4 to join as a voter with its certificate alone", func() bool {
		res, _, err := mgmt.Members(ctx, client.QueryOptions{})
		if err != nil {
			return false
		}
		for _, m := range res.Members {
			if m.ID == "n4" && m.Voter && m.HTTPAddr == "https://"+s.HTTPAddr() {
				return true
			}
		}
		return false
	})
	// A client with a certificate of the CA but no token is still refused elsewhere.
	anon := client.New(c.Nodes[leader].HTTPAddr, client.WithTLSConfig(c.TLS.Client))
	if _, _, err := anon.Members(ctx, client.QueryOptions{}); !client.IsUnauthenticated(err) {
		t.Fatalf("members with a client certificate and no token: %v, want 401", err)
	}
}

// Without TLS a join on a cluster with ACLs needs a token with operator: write: the
// node's --join-token.
func TestACL_JoinNeedsTheJoinTokenWithoutTLS(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	req := api.JoinRequest{ID: "ghost", RaftAddr: "127.0.0.1:9", HTTPAddr: "127.0.0.1:9", NonVoter: true}
	if _, err := c.Nodes[leader].Client().Join(ctx, req); !client.IsUnauthenticated(err) {
		t.Fatalf("a join without a token: %v, want 401", err)
	}
	reader := c.token(ctx, t, "reader", api.ACLRules{Operator: "read"})
	if _, err := c.as(leader, reader.SecretID).Join(ctx, req); !client.IsPermissionDenied(err) {
		t.Fatalf("a join with operator read: %v, want 403", err)
	}
	joiner := c.token(ctx, t, "joiner", api.ACLRules{Operator: "write"})
	f := c.Followers()[0]
	wait.For(t, 10*time.Second, "the follower to know the new token", func() bool {
		_, err := c.as(f, joiner.SecretID).TokenSelf(ctx)
		return err == nil
	})
	if _, err := c.as(f, joiner.SecretID).Join(ctx, req); err != nil {
		t.Fatalf("a join with operator write through a follower: %v", err)
	}
}

// /metrics answers anyone by default, ACLs or not; with --metrics-require-token it
// needs a token with operator: read (401 without one, 403 naming the permission with a
// token that lacks it).
func TestACL_MetricsRequireToken(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	bootstrapped := func(opts ...servertest.Option) (*servertest.Cluster, string) {
		c := servertest.New(t, 1, append([]servertest.Option{servertest.FastTimeouts(), servertest.WithACL()}, opts...)...)
		c.MustLeader()
		tok, err := c.Nodes[0].Client().ACLBootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, tok.SecretID
	}

	open, _ := bootstrapped()
	if code, b := rawDo(t, open.Nodes[0].HTTPAddr, "", "GET", "/metrics", ""); code != http.StatusOK {
		t.Fatalf("anonymous /metrics without --metrics-require-token: %d %s, want 200", code, b)
	}

	c, mgmt := bootstrapped(func(cfg *server.Config) { cfg.MetricsRequireToken = true })
	addr := c.Nodes[0].HTTPAddr
	m := client.New(addr, client.WithToken(mgmt))
	newToken := func(rules api.ACLRules) string { return tokenSecret(ctx, t, m, rules) }
	scraper := newToken(api.ACLRules{Operator: "read"})
	noOperator := newToken(api.ACLRules{Namespaces: map[string]string{"*": "write"}, ACL: "write"})

	if code, b := rawDo(t, addr, "", "GET", "/metrics", ""); code != http.StatusUnauthorized || errorCode(b) != api.CodeUnauthenticated {
		t.Fatalf("anonymous /metrics with --metrics-require-token: %d %s, want 401 unauthenticated", code, b)
	}
	code, b := rawDo(t, addr, noOperator, "GET", "/metrics", "")
	if code != http.StatusForbidden || errorCode(b) != api.CodePermissionDenied || !strings.Contains(string(b), "operator: read") {
		t.Fatalf("/metrics with a token without operator: read: %d %s, want 403 naming operator: read", code, b)
	}
	code, b = rawDo(t, addr, scraper, "GET", "/metrics", "")
	if code != http.StatusOK || !strings.Contains(string(b), "roster_") {
		t.Fatalf("/metrics with operator: read: %d, want 200 with the metrics:\n%.300s", code, b)
	}
}
