package server_test

import (
	"encoding/json"
	"errors"
	"net"
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
	"github.com/rosterhq/roster/server/servertest"
)

// No secret reaches a log, at debug level, on any node: not the bootstrap secret, not a
// created token's, not one presented in X-Roster-Token, Authorization: Bearer or a Nacos
// accessToken (query or form) through the leader or a follower that forwards it, not the
// password of a Nacos login (right or wrong), not an unknown secret, and not a MYSQL
// check's password written, refused, rejected as invalid or probed with.
func TestACL_SecretsAreNeverLogged(t *testing.T) {
	logger, logs := jsonLogs()
	c := newACLCluster(t, func(cfg *server.Config) { cfg.Logger = logger })
	ctx := ctxT(t, 90*time.Second)
	leader, f := c.MustLeader(), c.Followers()[0]

	// A token created through a follower: the answer that carries its secret is forwarded.
	writer, err := c.as(f, c.mgmt).CreateToken(ctx, api.ACLTokenRequest{Description: "writer",
		Rules: api.ACLRules{Namespaces: map[string]string{"*": "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		wait.For(t, 5*time.Second, c.Nodes[i].ID+" to know the new token", func() bool {
			_, err := c.as(i, writer.SecretID).TokenSelf(ctx)
			return err == nil
		})
	}
	const unknown = "5ec7e7aa-0000-4000-8000-00000000beef"
	const nacosWrongPassword = "Wr0ng-nacos-pw-2718"
	const dbPassword = "Db-probe-pw-1618"
	const dbPasswordRefused = "Db-refused-pw-1414"
	const dbPasswordInvalid = "Db-invalid-pw-1732"
	secrets := map[string]string{
		"the bootstrap secret": c.mgmt, "a created token's secret": writer.SecretID, "an unknown secret": unknown,
		"a wrong Nacos password": nacosWrongPassword, "a MYSQL password": dbPassword,
		"a refused MYSQL password": dbPasswordRefused, "an invalid spec's MYSQL password": dbPasswordInvalid,
	}

	// Native requests with the token in either header, through both nodes; the writes
	// through the follower are forwarded with it. Each also with an unknown secret.
	svc := "/v1/namespaces/public/groups/DEFAULT_GROUP/services/svc"
	for _, via := range []int{leader, f} {
		addr := c.Nodes[via].HTTPAddr
		for _, secret := range []string{writer.SecretID, unknown} {
			for _, header := range []string{api.HeaderToken, "Authorization"} {
				value := secret
				if header == "Authorization" {
					value = "Bearer " + secret
				}
				for _, rq := range [][3]string{
					{"PUT", svc + "/instances/127.0.0.1:7", `{}`},
					{"GET", svc + "/instances", ""},
					{"GET", "/v1/acl/token/self", ""},
					{"DELETE", svc + "/instances/127.0.0.1:7", ""},
				} {
					req, err := http.NewRequestWithContext(ctx, rq[0], "http://"+addr+rq[1], strings.NewReader(rq[2]))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set(header, value)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if want := secret == unknown; (resp.StatusCode == http.StatusUnauthorized) != want {
						t.Fatalf("%s %s via %s, %s: %d", rq[0], rq[1], c.Nodes[via].ID, header, resp.StatusCode)
					}
				}
			}
		}
	}

	// Nacos: logins with the token's accessor id and secret, and with a wrong password;
	// then requests with accessToken in the query and in the form, through both nodes.
	for _, via := range []int{leader, f} {
		addr := c.Nodes[via].HTTPAddr
		for _, pw := range []string{writer.SecretID, nacosWrongPassword} {
			code, b, _ := nacosDo(t, addr, "POST", "/nacos/v1/auth/login",
				"username="+url.QueryEscape(writer.AccessorID)+"&password="+url.QueryEscape(pw), "", "")
			var got loginAnswer
			if ok := code == http.StatusOK && json.Unmarshal(b, &got) == nil && got.AccessToken == writer.SecretID; ok != (pw == writer.SecretID) {
				t.Fatalf("nacos login via %s with password %q: %d %s", c.Nodes[via].ID, pw, code, b)
			}
		}
		for i, place := range []string{"query", "form"} {
			for _, secret := range []string{writer.SecretID, unknown} {
				form := "serviceName=nacos-svc&ephemeral=false&ip=127.0.0.3&port=" + strconv.Itoa(via*10+i+1)
				code, b, _ := nacosDo(t, addr, "POST", "/nacos/v1/ns/instance", form, place, secret)
				if (code == http.StatusOK) != (secret == writer.SecretID) {
					t.Fatalf("nacos register via %s, accessToken in the %s: %d %s", c.Nodes[via].ID, place, code, b)
				}
				nacosDo(t, addr, "GET", "/nacos/v1/ns/instance/list?serviceName=nacos-svc", "", place, secret)
			}
		}
	}

	// MYSQL checks: a password set through a follower (forwarded, replicated, applied
	// by every node), refused for a token without operator: write, rejected with an
	// invalid spec; then probed by the leader (the port refuses: nothing listens).
	mysql := func(pw, timeout string) api.ClusterRequest {
		return api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "MYSQL", User: "probe", Password: pw,
			Interval: "1s", Timeout: timeout, Rise: 1, Fall: 1}}
	}
	idx, err := c.as(f, c.mgmt).UpsertCluster(ctx, ns, group, "db", "DEFAULT", mysql(dbPassword, "500ms"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.as(f, writer.SecretID).UpsertCluster(ctx, ns, group, "db", "DEFAULT", mysql(dbPasswordRefused, "500ms")); !client.IsPermissionDenied(err) {
		t.Fatalf("a MYSQL password without operator: write: %v, want 403", err)
	}
	if _, err := c.as(f, c.mgmt).UpsertCluster(ctx, ns, group, "db", "DEFAULT", mysql(dbPasswordInvalid, "5s")); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("a MYSQL check whose timeout exceeds its interval: %v, want 400", err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(servertest.FreePort(t))
	port, _ := strconv.Atoi(portStr)
	if _, err := c.as(leader, c.mgmt).RegisterInstance(ctx, ns, group, "db", "127.0.0.1", port, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 15*time.Second, "the leader to probe the MYSQL instance", func() bool {
		res, err := c.as(c.MustLeader(), c.mgmt).Health(ctx, ns, group, "db")
		return err == nil && len(res.Results) == 1 && res.Results[0].Outcome != ""
	})

	all := logs.linesWith("")
	if len(logs.linesWith(`"level":"DEBUG"`)) == 0 || len(logs.linesWith(`"msg":"http request"`)) == 0 ||
		len(logs.linesWith(`"msg":"forwarding the request to the leader"`)) == 0 {
		t.Fatalf("the nodes' debug logs were not captured (%d lines)", len(all))
	}
	for what, secret := range secrets {
		if lines := logs.linesWith(secret); len(lines) > 0 {
			t.Errorf("%s shows in %d log lines, the first: %s", what, len(lines), lines[0])
		}
	}
	t.Logf("%d log lines checked", len(all))
}

// isStatus reports whether err is an API error with the HTTP status code.
func isStatus(err error, code int) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == code
}
