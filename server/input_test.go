package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/server/servertest"
)

// TestCluster_MalformedQuerySameAnswerOnEveryNode sends requests with a malformed
// query string to the leader and to each follower. The reverse proxy that forwards a
// follower's request drops the parameters it cannot parse, so a request the leader
// refused used to be applied when sent through a follower (and a ?cas= lost that way
// made a conditional write unconditional). Every node must refuse it itself, with the
// same status and body, and the Raft log must not move.
func TestCluster_MalformedQuerySameAnswerOnEveryNode(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	// A NONE cluster: no probe may commit a health transition during the test.
	if _, err := c.Nodes[l].Client().UpsertCluster(ctx, ns, group, "svc", "DEFAULT",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	idx := register(ctx, t, c.Nodes[l].Client(), "svc", "127.100.0.5", 1)
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled()
	r := c.Nodes[l].Server.Node().Raft()
	before := r.LastIndex()

	const inst = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/svc/instances/127.100.0.6:80"
	const nacosReg = "/nacos/v1/ns/instance?serviceName=svc&ip=127.100.0.6&port=80&ephemeral=false"
	// local: the query string is malformed, so the node that receives the request
	// answers it without forwarding; the overflowing page is well-formed and is refused
	// by whichever node serves the read.
	cases := []struct {
		method, target, contentType, body string
		local                             bool
	}{
		{"PUT", inst + "?cas=%zz1", "application/json", `{}`, true},
		{"PUT", inst + "?x=%zz", "application/json", `{}`, true},
		{"PUT", inst + "?cas=1;x=1", "application/json", `{}`, true},
		{"PUT", inst + "?x=%FF", "application/json", `{}`, true},
		{"GET", "/v1/namespaces/public/services?page=4611686018427387905&size=1000", "", "", false},
		{"POST", nacosReg + "&x=%zz", "", "", true},
		{"POST", nacosReg + "&metadata=k%3D%FF", "", "", true},
		{"POST", "/nacos/v1/ns/instance?x=%zz", "application/x-www-form-urlencoded", "serviceName=svc&ip=127.100.0.6&port=80&ephemeral=false", true},
		{"POST", "/nacos/v2/ns/instance?x=%zz", "application/x-www-form-urlencoded", "serviceName=svc&ip=127.100.0.6&port=80&ephemeral=false", true},
		{"GET", "/nacos/v1/ns/instance/list?serviceName=svc&clusters=%FF", "", "", true},
	}
	nodes := append([]int{l}, c.Followers()...)
	for _, tc := range cases {
		var want string
		for _, i := range nodes {
			req, err := http.NewRequestWithContext(ctx, tc.method, "http://"+c.Nodes[i].HTTPAddr+tc.target, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s on %s: status %d %s, want 400", tc.method, tc.target, c.Nodes[i].ID, resp.StatusCode, b)
				continue
			}
			if by := resp.Header.Get(api.HeaderServedBy); tc.local && by != c.Nodes[i].ID {
				t.Errorf("%s %s on %s: answered by %q, want the node that received it", tc.method, tc.target, c.Nodes[i].ID, by)
			}
			if !strings.HasPrefix(tc.target, "/nacos/") {
				var eb api.ErrorBody
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code != api.CodeInvalid || eb.Error.Field == "" {
					t.Errorf("%s %s on %s: body %s, want an invalid_argument naming the field", tc.method, tc.target, c.Nodes[i].ID, b)
				}
			}
			if want == "" {
				want = string(b)
			} else if string(b) != want {
				t.Errorf("%s %s: %s answered %s, the leader %s", tc.method, tc.target, c.Nodes[i].ID, b, want)
			}
		}
	}
	if after := r.LastIndex(); after != before {
		t.Fatalf("raft last index moved from %d to %d on malformed queries", before, after)
	}
	for _, i := range nodes {
		if got := c.Nodes[i].Server.Node().Raft().LastIndex(); got != before {
			t.Fatalf("%s: raft last index %d, want %d", c.Nodes[i].ID, got, before)
		}
	}
}
