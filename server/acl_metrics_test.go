package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// With ACLs on, /metrics still answers anyone, but only with the cluster-wide series:
// the series that name namespaces and services (roster_instances) need a token with
// operator: read. A token without it gets what anonymous gets; an unknown one is 401.
func TestACL_MetricsShowNamesOnlyToOperators(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithACL())
	c.MustLeader()
	boot, err := c.Nodes[0].Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.Nodes[0].HTTPAddr
	m := client.New(addr, client.WithToken(boot.SecretID))
	if _, err := m.UpsertNamespace(ctx, "secret", api.NamespaceRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpsertCluster(ctx, "secret", group, "db", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterInstance(ctx, "secret", group, "db", "127.0.0.1", 3306, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	newToken := func(rules api.ACLRules) string { return tokenSecret(ctx, t, m, rules) }
	scraper := newToken(api.ACLRules{Operator: "read"})
	writer := newToken(api.ACLRules{Namespaces: map[string]string{"*": "write"}, ACL: "read"})

	const named = `namespace="secret"`
	wait.For(t, 10*time.Second, "the operator's /metrics to name the service", func() bool {
		code, b := rawDo(t, addr, scraper, "GET", "/metrics", "")
		return code == http.StatusOK && strings.Contains(string(b), `roster_instances{`) && strings.Contains(string(b), named) &&
			strings.Contains(string(b), `service="db"`)
	})
	for _, who := range []struct{ name, secret string }{{"anonymous", ""}, {"a namespace writer without operator read", writer}} {
		code, b := rawDo(t, addr, who.secret, "GET", "/metrics", "")
		if code != http.StatusOK || !strings.Contains(string(b), "roster_build_info") || !strings.Contains(string(b), "roster_http_requests_total") {
			t.Fatalf("/metrics as %s: %d, want 200 with the cluster-wide series:\n%.300s", who.name, code, b)
		}
		if strings.Contains(string(b), named) || strings.Contains(string(b), `service="db"`) || strings.Contains(string(b), "roster_instances{") {
			t.Fatalf("/metrics as %s names namespaces or services:\n%s", who.name, grepLines(string(b), "secret"))
		}
	}
	if code, b := rawDo(t, addr, "00000000-0000-4000-8000-000000000000", "GET", "/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with an unknown token: %d %s, want 401", code, b)
	}
}
