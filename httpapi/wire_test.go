package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/model"
)

// fixedHealth is a HealthResults with fixed results for every service.
type fixedHealth []healthcheck.Result

func (h fixedHealth) Results(model.ServiceKey) ([]healthcheck.Result, bool) { return h, true }

// wireReader holds namespaces public and dev and service dev/g1@@pay with an HTTP
// cluster "web", a NONE cluster "DEFAULT" and two instances, one without metadata.
func wireReader() *fakeReader {
	f := newFakeReader()
	f.namespaces = append(f.namespaces, model.Namespace{ID: "dev", Name: "Dev", Description: "dev env", CreateIndex: 2, ModifyIndex: 4})
	f.services = []model.Service{{Namespace: "dev", Group: "g1", Name: "pay", ProtectThreshold: 0.25,
		Metadata: map[string]string{"team": "billing"}, CreateIndex: 5, ModifyIndex: 9}}
	f.clusters = []model.Cluster{
		{Namespace: "dev", Group: "g1", Service: "pay", Name: "DEFAULT",
			HealthCheck: model.HealthCheck{Type: model.CheckNone}.WithDefaults(), CreateIndex: 5, ModifyIndex: 5},
		{Namespace: "dev", Group: "g1", Service: "pay", Name: "web", HealthCheck: model.HealthCheck{
			Type: model.CheckHTTP, Port: 8081, Path: "/hz", Headers: map[string]string{"Host": "pay"},
			ExpectedStatus: []int{200, 204}, Interval: model.Duration(1500 * time.Millisecond),
			Timeout: model.Duration(time.Second), Rise: 1, Fall: 4, DeregisterAfter: model.Duration(72 * time.Hour),
		}, Metadata: map[string]string{"zone": "a"}, CreateIndex: 6, ModifyIndex: 7},
	}
	f.instances = []model.Instance{
		{Namespace: "dev", Group: "g1", Service: "pay", IP: "127.100.0.1", Port: 8080, Cluster: "web",
			Weight: 2.5, Enabled: true, Healthy: true, Metadata: map[string]string{"v": "1"}, CreateIndex: 8, ModifyIndex: 9},
		{Namespace: "dev", Group: "g1", Service: "pay", IP: "::1", Port: 9090, Cluster: "DEFAULT",
			Weight: 1, Enabled: false, Healthy: false, CreateIndex: 7, ModifyIndex: 7, UnhealthySince: 1764676800123},
	}
	return f
}

// TestWire_GoldenJSON pins the exact bytes of the native API's read responses, so that
// a change to a wire type (a renamed field, a lost omitempty, a duration format) fails
// here rather than in a client.
func TestWire_GoldenJSON(t *testing.T) {
	node := newLeaderNode("n1")
	node.members = []api.Member{
		{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848", Voter: true, Leader: true, Version: "v0.3.0", Commit: "0123456789abcdef", NewestCommand: 23},
		{ID: "n2", RaftAddr: "127.0.0.2:7848", Voter: false, LastContactMillis: -1, NewestCommand: 12},
	}
	last := time.Date(2024, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	cfg := testConfig(node, wireReader())
	cfg.Health = fixedHealth{
		{IP: "127.100.0.1", Port: 8080, Cluster: "web", Epoch: 8, CheckType: model.CheckHTTP,
			Target: "http://127.100.0.1:8081/hz", Healthy: true, Pending: true, LastCheck: last,
			Latency: 1234 * time.Microsecond, Outcome: "refused", Error: "connection refused",
			ConsecutiveFailures: 1, Rise: 1, Fall: 4, Interval: 1500 * time.Millisecond,
			NextCheck: last.Add(1500 * time.Millisecond)},
		{IP: "127.100.0.2", Port: 8080, Cluster: "web", Epoch: 9, CheckType: model.CheckHTTP,
			Target: "http://127.100.0.2:8081/hz", LastCheck: last, Latency: 2 * time.Second,
			Outcome: "status", Status: 503, Error: "HTTP status 503 is not healthy", ConsecutiveFailures: 4,
			Rise: 1, Fall: 4, Interval: 1500 * time.Millisecond, NextCheck: last},
		{IP: "::1", Port: 9090, Cluster: "DEFAULT", Epoch: 7, CheckType: model.CheckNone, Rise: 2, Fall: 3,
			Interval: 5 * time.Second},
	}
	h := mustNew(t, cfg)

	const svc = "/v1/namespaces/dev/groups/g1/services/pay"
	const (
		nsDev = `{"id":"dev","name":"Dev","description":"dev env","createIndex":2,"modifyIndex":4}`
		nsPub = `{"id":"public","name":"public","description":"","createIndex":1,"modifyIndex":1}`

		service = `{"namespace":"dev","group":"g1","name":"pay","protectThreshold":0.25,"metadata":{"team":"billing"},"createIndex":5,"modifyIndex":9}`

		clDefault = `{"namespace":"dev","group":"g1","service":"pay","name":"DEFAULT",` +
			`"healthCheck":{"type":"NONE","port":0,"interval":"5s","timeout":"2s","rise":2,"fall":3,"confirm":"majority"},` +
			`"metadata":null,"createIndex":5,"modifyIndex":5}`
		clWeb = `{"namespace":"dev","group":"g1","service":"pay","name":"web",` +
			`"healthCheck":{"type":"HTTP","port":8081,"path":"/hz","headers":{"Host":"pay"},"expectedStatus":[200,204],` +
			`"interval":"1.5s","timeout":"1s","rise":1,"fall":4,"confirm":"majority","deregisterAfter":"72h0m0s"},` +
			`"metadata":{"zone":"a"},"createIndex":6,"modifyIndex":7}`

		inst1 = `{"namespace":"dev","group":"g1","service":"pay","ip":"127.100.0.1","port":8080,"cluster":"web",` +
			`"weight":2.5,"enabled":true,"healthy":true,"metadata":{"v":"1"},"createIndex":8,"modifyIndex":9,` +
			`"instanceId":"127.100.0.1#8080#web#g1@@pay"}`
		inst2 = `{"namespace":"dev","group":"g1","service":"pay","ip":"::1","port":9090,"cluster":"DEFAULT",` +
			`"weight":1,"enabled":false,"healthy":false,"metadata":null,"createIndex":7,"modifyIndex":7,` +
			`"instanceId":"::1#9090#DEFAULT#g1@@pay","unhealthySince":"2025-12-02T12:00:00.123Z"}`
	)
	cases := []struct {
		path, want string
	}{
		{path: "/v1/namespaces", want: `{"index":10,"namespaces":[` + nsPub + `,` + nsDev + `]}`},
		{path: "/v1/namespaces/dev", want: `{"index":10,"namespace":` + nsDev + `}`},
		{path: "/v1/namespaces/dev/services", want: `{"index":10,"namespace":"dev","page":1,"size":100,"total":1,"services":[` +
			strings.TrimSuffix(service, "}") + `,"instanceCount":2,"healthyCount":1,"protectThresholdReached":false}]}`},
		{path: "/v1/namespaces/dev/services?name=PA", want: `{"index":10,"namespace":"dev","page":1,"size":100,"total":1,"services":[` +
			strings.TrimSuffix(service, "}") + `,"instanceCount":2,"healthyCount":1,"protectThresholdReached":false}]}`},
		{path: "/v1/namespaces/dev/services?name=orders", want: `{"index":10,"namespace":"dev","page":1,"size":100,"total":0,"services":[]}`},
		{path: "/v1/namespaces/public/services", want: `{"index":10,"namespace":"public","page":1,"size":100,"total":0,"services":[]}`},
		{path: svc, want: `{"index":10,"service":` + service + `,"clusters":[` + clDefault + `,` + clWeb + `],"instanceCount":2,"healthyCount":1}`},
		{path: svc + "/clusters", want: `{"index":10,"clusters":[` + clDefault + `,` + clWeb + `]}`},
		{path: svc + "/clusters/web", want: `{"index":10,"cluster":` + clWeb + `}`},
		{path: svc + "/instances", want: `{"service":` + service + `,"index":10,"protectThresholdReached":false,"instances":[` + inst1 + `,` + inst2 + `]}`},
		{path: svc + "/instances?healthy=true&cluster=DEFAULT", want: `{"service":` + service + `,"index":10,"protectThresholdReached":false,"instances":[]}`},
		{path: svc + "/instances/127.100.0.1:8080", want: `{"index":10,"instance":` + inst1 + `}`},
		{path: svc + "/instances/[::1]:9090", want: `{"index":10,"instance":` + inst2 + `}`},
		{path: svc + "/health", want: `{"namespace":"dev","group":"g1","service":"pay","leader":"n1","probing":true,"results":[` +
			`{"ip":"127.100.0.1","port":8080,"cluster":"web","epoch":8,"checkType":"HTTP","target":"http://127.100.0.1:8081/hz",` +
			`"healthy":true,"pending":true,"lastCheck":"2024-05-06T07:08:09.5Z","latency":"1.234ms","outcome":"refused",` +
			`"error":"connection refused","consecutiveSuccesses":0,"consecutiveFailures":1,"rise":1,"fall":4,"interval":"1.5s",` +
			`"nextCheck":"2024-05-06T07:08:11Z"},` +
			`{"ip":"127.100.0.2","port":8080,"cluster":"web","epoch":9,"checkType":"HTTP","target":"http://127.100.0.2:8081/hz",` +
			`"healthy":false,"pending":false,"lastCheck":"2024-05-06T07:08:09.5Z","latency":"2s","outcome":"status","status":503,` +
			`"error":"HTTP status 503 is not healthy","consecutiveSuccesses":0,"consecutiveFailures":4,"rise":1,"fall":4,` +
			`"interval":"1.5s","nextCheck":"2024-05-06T07:08:09.5Z"},` +
			`{"ip":"::1","port":9090,"cluster":"DEFAULT","epoch":7,"checkType":"NONE","healthy":false,"pending":false,` +
			`"consecutiveSuccesses":0,"consecutiveFailures":0,"rise":2,"fall":3,"interval":"5s"}]}`},
		{path: "/v1/cluster/members", want: `{"index":10,"members":[` +
			`{"id":"n1","raftAddr":"127.0.0.1:7848","httpAddr":"127.0.0.1:8848","voter":true,"leader":true,"lastContactMillis":0,` +
			`"version":"v0.3.0","commit":"0123456789abcdef","newestCommand":23,"release":"v0.3.0"},` +
			`{"id":"n2","raftAddr":"127.0.0.2:7848","httpAddr":"","voter":false,"leader":false,"lastContactMillis":-1,` +
			`"newestCommand":12,"release":"a release before v0.2.0"}]}`},
		{path: "/v1/status/leader", want: `{"id":"n1","raftAddr":"127.0.0.1:7848","httpAddr":"127.0.0.1:8848"}`},
		{path: "/v1/status/ready", want: `{"ready":true,"leader":"n1","appliedIndex":7,"commitIndex":7,"leaderCommitIndex":7,"clusterId":"c0ffee00-0000-4000-8000-000000000001",` +
			`"build":{"version":"v0.3.0","commit":"0123456789abcdef","goVersion":"go1.26.8","newestCommand":23}}`},
		{path: "/v1/operator/settings", want: `{"index":1,"metadataMaxBytes":1024,"modifyIndex":0}`},
	}
	for _, tc := range cases {
		resp := do(t, h, http.MethodGet, tc.path, nil)
		if resp.Code != http.StatusOK || string(resp.Body) != tc.want+"\n" {
			t.Errorf("GET %s: %d\n got %s\nwant %s", tc.path, resp.Code, resp.Body, tc.want)
		}
	}

	// Not ready: 503 with the same shape and the reason.
	node.ready = false
	resp := do(t, h, http.MethodGet, "/v1/status/ready", nil)
	if want := `{"ready":false,"leader":"n1","appliedIndex":7,"commitIndex":7,"leaderCommitIndex":7,"clusterId":"c0ffee00-0000-4000-8000-000000000001","reason":"no leader",` +
		`"build":{"version":"v0.3.0","commit":"0123456789abcdef","goVersion":"go1.26.8","newestCommand":23}}`; resp.Code != http.StatusServiceUnavailable || string(resp.Body) != want+"\n" {
		t.Errorf("GET /v1/status/ready (not ready): %d\n got %s\nwant %s", resp.Code, resp.Body, want)
	}
}

// TestWire_ReadyHalted checks the readiness of a node whose state machine stopped at a
// committed entry of a newer command type: 503, reasonCode needs_upgrade, and the entry.
func TestWire_ReadyHalted(t *testing.T) {
	node := newLeaderNode("n1")
	node.ready = false
	node.halt = &fsm.Halt{Index: 41, Type: fsm.MessageType(30), Reason: fsm.HaltNeedsUpgrade, Newest: 23}
	h := mustNew(t, testConfig(node, wireReader()))
	resp := do(t, h, http.MethodGet, "/v1/status/ready", nil)
	var got map[string]json.RawMessage
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	if resp.Code != http.StatusServiceUnavailable || string(got["ready"]) != "false" || string(got["reasonCode"]) != `"needs_upgrade"` ||
		string(got["haltedAt"]) != `{"index":41,"type":30,"typeName":"MessageType(30)"}` {
		t.Fatalf("GET /v1/status/ready (halted): %d %s", resp.Code, resp.Body)
	}
	var reason string
	if err := json.Unmarshal(got["reason"], &reason); err != nil || !strings.Contains(reason, "committed entry 41") || !strings.Contains(reason, "type 30") {
		t.Fatalf("reason %s does not name the entry", got["reason"])
	}

	// A halt for an undecodable entry is not an upgrade: no reasonCode.
	node.halt = &fsm.Halt{Index: 41, Type: fsm.MessageType(3), Reason: fsm.HaltUndecodable, Err: errors.New("msgpack: bad")}
	resp = do(t, h, http.MethodGet, "/v1/status/ready", nil)
	if resp.Code != http.StatusServiceUnavailable || strings.Contains(string(resp.Body), "reasonCode") || !strings.Contains(string(resp.Body), `"haltedAt":{"index":41`) {
		t.Fatalf("GET /v1/status/ready (undecodable): %d %s", resp.Code, resp.Body)
	}
}

// TestProbeResult_JSON checks the wire form of a result that was never probed: the
// times, the latency and the outcome are left out.
func TestProbeResult_JSON(t *testing.T) {
	r := healthcheck.Result{IP: "127.100.0.1", Port: 80, CheckType: model.CheckTCP, Interval: 5 * time.Second}
	b, err := json.Marshal(wireProbeResult(r))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"ip":"127.100.0.1"`, `"checkType":"TCP"`, `"interval":"5s"`, `"consecutiveFailures":0`} {
		if !strings.Contains(s, want) {
			t.Fatalf("%s lacks %s", s, want)
		}
	}
	for _, absent := range []string{"lastCheck", "nextCheck", "outcome", "latency", "deregisterAt"} {
		if strings.Contains(s, absent) {
			t.Fatalf("%s has %s before any probe", s, absent)
		}
	}
}
