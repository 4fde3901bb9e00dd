package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/snapshot"
)

const demoSvc = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo"

// assertCall checks the fake saw exactly one call with this method, path, query and JSON body.
func assertCall(t *testing.T, f *fakeAPI, method, path string, query url.Values, body string) {
	t.Helper()
	c := f.onlyCall(t)
	if c.method != method || c.path != path {
		t.Errorf("request = %s %s, want %s %s", c.method, c.path, method, path)
	}
	if query == nil {
		query = url.Values{}
	}
	if !reflect.DeepEqual(c.query, query) {
		t.Errorf("query = %v, want %v", c.query, query)
	}
	if body == "" {
		if c.body != "" {
			t.Errorf("body = %s, want none", c.body)
		}
		return
	}
	var got, want any
	if err := json.Unmarshal([]byte(c.body), &got); err != nil {
		t.Fatalf("body %q: %v", c.body, err)
	}
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body = %s, want %s", c.body, body)
	}
}

func wantExit(t *testing.T, r cliResult, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
}

func TestRegister_SendsInstanceAndPrintsIndex(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"PUT /v1/namespaces/dev/groups/g1/services/orders/instances/%5B::1%5D:8080": {body: `{"index":17}`},
	})
	r := runCLI(t, nil, "register", "orders", "[::1]:8080", "--addr", f.addr(),
		"--namespace", "dev", "--group", "g1", "--cluster", "east", "--weight", "2.5", "--enabled=false",
		"--meta", "version=1.4", "--meta", "url=http://x/?a=b")
	wantExit(t, r, 0)
	assertCall(t, f, "PUT", "/v1/namespaces/dev/groups/g1/services/orders/instances/%5B::1%5D:8080", nil,
		`{"cluster":"east","weight":2.5,"enabled":false,"metadata":{"version":"1.4","url":"http://x/?a=b"}}`)
	if want := "registered orders [::1]:8080 in dev/g1 (index 17)\n"; r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
}

func TestRegister_DefaultsAndJSONOutput(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"PUT " + demoSvc + "/instances/127.100.0.7:80": {body: `{"index":3}`},
	})
	r := runCLI(t, nil, "register", "demo", "127.100.0.7:80", "--addr", f.addr(), "-o", "json")
	wantExit(t, r, 0)
	assertCall(t, f, "PUT", demoSvc+"/instances/127.100.0.7:80", nil, `{"cluster":"DEFAULT","weight":1,"enabled":true}`)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index != 3 {
		t.Fatalf("stdout %q: want {\"index\":3} (%v)", r.stdout, err)
	}
}

func TestRegister_BadArgumentsSendNothing(t *testing.T) {
	f := newFakeAPI(t, nil)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"register", "demo", "127.100.0.7"}, `instance address "127.100.0.7"`},
		{[]string{"register", "demo", "127.100.0.7:0"}, "port must be 1..65535"},
		{[]string{"register", "demo", "::1:80"}, "IP:PORT"},
		{[]string{"register", "demo", "127.100.0.7:80", "--meta", "novalue"}, `--meta "novalue": want key=value`},
		{[]string{"register", "demo"}, "usage: roster register SERVICE IP:PORT"},
		{[]string{"register", "demo", "127.100.0.7:80", "-o", "yaml"}, `--output "yaml": must be table or json`},
	}
	for _, tc := range cases {
		r := runCLI(t, nil, append(tc.args, "--addr", f.addr())...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "roster: ") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and roster: ...%s", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := f.callCount(); n != 0 {
		t.Fatalf("fake API saw %d calls, want 0", n)
	}
}

func TestClientCommand_APIErrorShowsField(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"PUT " + demoSvc + "/instances/127.100.0.7:80": {status: 400,
			body: `{"error":{"code":"invalid_argument","message":"must be between 0 and 10000","field":"weight"}}`},
	})
	r := runCLI(t, nil, "register", "demo", "127.100.0.7:80", "--weight", "20000", "--addr", f.addr())
	wantExit(t, r, 1)
	if want := "roster: weight: must be between 0 and 10000 (400 invalid_argument)\n"; r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	if r.stdout != "" {
		t.Fatalf("stdout %q, want empty", r.stdout)
	}
}

func TestClientCommand_AddrFromEnvAndFlagWins(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET /v1/status/leader": {body: `{"id":"n1","raftAddr":"127.100.0.1:7848","httpAddr":"127.100.0.1:8848"}`},
	})
	r := runCLI(t, map[string]string{"ROSTER_ADDR": f.addr(), "ROSTER_OUTPUT": "json"}, "leader")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, `"id": "n1"`) {
		t.Fatalf("stdout %q: want the leader as JSON", r.stdout)
	}
	// A flag beats the variable: the env address is unreachable, the flag's is the fake.
	r = runCLI(t, map[string]string{"ROSTER_ADDR": "127.0.0.1:1"}, "leader", "--addr", f.addr())
	wantExit(t, r, 0)
}

func TestDeregister_DeletesAndPrintsIndex(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"DELETE " + demoSvc + "/instances/127.100.0.7:80": {body: `{"index":21}`},
	})
	r := runCLI(t, nil, "deregister", "demo", "127.100.0.7:80", "--addr", f.addr())
	wantExit(t, r, 0)
	assertCall(t, f, "DELETE", demoSvc+"/instances/127.100.0.7:80", nil, "")
	if want := "deregistered demo 127.100.0.7:80 in public/DEFAULT_GROUP (index 21)\n"; r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
}

func TestDeregister_NotFoundExits1(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"DELETE " + demoSvc + "/instances/127.100.0.7:80": {status: 404, body: `{"error":{"code":"not_found","message":"instance 127.100.0.7:80 not found"}}`},
	})
	r := runCLI(t, nil, "deregister", "demo", "127.100.0.7:80", "--addr", f.addr())
	wantExit(t, r, 1)
	if want := "roster: instance 127.100.0.7:80 not found (404 not_found)\n"; r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

const instancesBody = `{"service":{"name":"demo","protectThreshold":0.8},"index":9,"protectThresholdReached":true,"instances":[
 {"ip":"127.100.0.7","port":80,"cluster":"east","weight":2,"enabled":true,"healthy":true,"metadata":{"v":"1","a":"x"},"instanceId":"i1"},
 {"ip":"::1","port":8080,"cluster":"west","weight":0.5,"enabled":true,"healthy":false,"instanceId":"i2"}]}`

func TestInstances_TableWithFilters(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET " + demoSvc + "/instances": {body: instancesBody}})
	r := runCLI(t, nil, "instances", "demo", "--addr", f.addr(), "--healthy", "--cluster", "east,west", "--consistency", "stale")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", demoSvc+"/instances",
		url.Values{"healthy": {"true"}, "cluster": {"east,west"}, "consistency": {"stale"}}, "")
	want := "" +
		"ADDRESS         CLUSTER  WEIGHT  ENABLED  HEALTHY  METADATA\n" +
		"127.100.0.7:80  east     2       true     true     a=x,v=1\n" +
		"[::1]:8080      west     0.5     true     false    -\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "protect threshold 0.8 reached") {
		t.Fatalf("stderr %q: want the protect-threshold note", r.stderr)
	}
}

func TestInstances_JSONIsTheResponse(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/namespaces/dev/groups/g/services/demo/instances": {body: instancesBody}})
	r := runCLI(t, nil, "instances", "demo", "--addr", f.addr(), "--namespace", "dev", "--group", "g", "-o", "json")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/namespaces/dev/groups/g/services/demo/instances", nil, "")
	var got api.InstancesResponse
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if len(got.Instances) != 2 || got.Instances[1].IP != "::1" || !got.ProtectThresholdReached || got.Index != 9 {
		t.Fatalf("decoded %+v", got)
	}
}

func TestServices_TableAndPagingNote(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/namespaces/dev/services": {body: `{"index":5,"namespace":"dev","page":1,"size":2,"total":3,"services":[
		{"namespace":"dev","group":"DEFAULT_GROUP","name":"orders","protectThreshold":0,"instanceCount":3,"healthyCount":3},
		{"namespace":"dev","group":"g2","name":"users","protectThreshold":0.5,"metadata":{"team":"id"},"instanceCount":2,"healthyCount":1,"protectThresholdReached":true}]}`}})
	r := runCLI(t, nil, "services", "--addr", f.addr(), "--namespace", "dev", "--group", "g2", "--name", "Us", "--page", "1", "--size", "2")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/namespaces/dev/services", url.Values{"group": {"g2"}, "name": {"Us"}, "page": {"1"}, "size": {"2"}}, "")
	want := "" +
		"GROUP          SERVICE  INSTANCES  HEALTHY  PROTECT_THRESHOLD  METADATA\n" +
		"DEFAULT_GROUP  orders   3          3        0                  -\n" +
		"g2             users    2          1        0.5 (reached)      team=id\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "showing 2 of 3 services") {
		t.Fatalf("stderr %q: want the paging note", r.stderr)
	}
}

func TestLeader_Table(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET /v1/status/leader": {body: `{"id":"n2","raftAddr":"127.100.0.2:7848","httpAddr":"127.100.0.2:8848"}`},
	})
	r := runCLI(t, nil, "leader", "--addr", f.addr())
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/status/leader", nil, "")
	want := "ID  RAFT_ADDR         HTTP_ADDR\nn2  127.100.0.2:7848  127.100.0.2:8848\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestLeader_NoLeaderExits1(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET /v1/status/leader": {status: 503, body: `{"error":{"code":"no_leader","message":"no leader elected"}}`},
	})
	r := runCLI(t, nil, "leader", "--addr", f.addr())
	wantExit(t, r, 1)
	if want := "roster: no leader elected (503 no_leader)\n"; r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

func TestMembers_Table(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/cluster/members": {body: `{"index":4,"members":[
		{"id":"n1","raftAddr":"127.100.0.1:7848","httpAddr":"127.100.0.1:8848","voter":true,"leader":true,"lastContactMillis":0,
		 "version":"v0.3.0","newestCommand":23,"release":"v0.3.0"},
		{"id":"n2","raftAddr":"127.100.0.2:7848","httpAddr":"","voter":false,"leader":false,"lastContactMillis":-1,
		 "newestCommand":12,"release":"a release before v0.2.0"},
		{"id":"n3","raftAddr":"127.100.0.3:7848","httpAddr":"127.100.0.3:8848","voter":true,"leader":false,"lastContactMillis":1250}]}`}})
	r := runCLI(t, nil, "members", "--addr", f.addr(), "--consistency", "stale")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/cluster/members", url.Values{"consistency": {"stale"}}, "")
	want := "" +
		"ID  RAFT_ADDR         HTTP_ADDR         VOTER  LEADER  LAST_CONTACT  VERSION                  NEWEST_COMMAND\n" +
		"n1  127.100.0.1:7848  127.100.0.1:8848  true   true    0s            v0.3.0                   23\n" +
		"n2  127.100.0.2:7848  -                 false  false   -             a release before v0.2.0  12\n" +
		"n3  127.100.0.3:7848  127.100.0.3:8848  true   false   1.25s         -                        -\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestMembers_StatusColumns(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/cluster/members": {body: `{"index":4,"members":[
		{"id":"n1","raftAddr":"127.100.0.1:7848","httpAddr":"127.100.0.1:8848","voter":true,"leader":true,"lastContactMillis":0,
		 "status":{"reachable":true,"ready":true,"appliedIndex":42,"commitIndex":42,"lag":0,"build":{"version":"v0.3.0","newestCommand":23}}},
		{"id":"n2","raftAddr":"127.100.0.2:7848","httpAddr":"127.100.0.2:8848","voter":true,"leader":false,"lastContactMillis":10,
		 "status":{"reachable":true,"ready":false,"appliedIndex":30,"commitIndex":42,"lag":12,"reason":"applying committed entries"}},
		{"id":"n3","raftAddr":"127.100.0.3:7848","httpAddr":"127.100.0.3:8848","voter":true,"leader":false,"lastContactMillis":-1,
		 "status":{"reachable":false,"ready":false,"appliedIndex":0,"commitIndex":0,"lag":0,"error":"connection refused"}}]}`}})
	r := runCLI(t, nil, "members", "--addr", f.addr(), "--status")
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/cluster/members", url.Values{"detail": {"true"}}, "")
	squeezed := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"VERSION NEWEST_COMMAND READY APPLIED LAG", "0s v0.3.0 23 true 42 0", "false (applying committed entries) 30 12",
		"unreachable: connection refused - -"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestReady_ExitStatus(t *testing.T) {
	cases := []struct {
		name       string
		route      fakeRoute
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{
			name:   "200 ready",
			route:  fakeRoute{status: 200, body: `{"ready":true,"leader":"n1","appliedIndex":12,"commitIndex":12}`},
			code:   0,
			stdout: "ready (leader n1, applied index 12)\n",
		},
		{
			name:       "503 not ready",
			route:      fakeRoute{status: 503, body: `{"ready":false,"appliedIndex":3,"commitIndex":12,"reason":"applying the log"}`},
			code:       1,
			stderrPart: "roster: not ready: applying the log\n",
		},
		{
			name:       "503 error body",
			route:      fakeRoute{status: 503, body: `{"error":{"code":"no_leader","message":"no leader"}}`},
			code:       1,
			stderrPart: "roster: no leader (503 no_leader)\n",
		},
		{
			name:       "503 json output",
			route:      fakeRoute{status: 503, body: `{"ready":false,"appliedIndex":3,"commitIndex":12}`},
			args:       []string{"-o", "json"},
			code:       1,
			stderrPart: "roster: not ready: applied index 3, commit index 12\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/status/ready": tc.route})
			r := runCLI(t, nil, append([]string{"ready", "--addr", f.addr()}, tc.args...)...)
			wantExit(t, r, tc.code)
			assertCall(t, f, "GET", "/v1/status/ready", nil, "")
			if tc.stdout != "" && r.stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tc.stdout)
			}
			if tc.stderrPart != "" && r.stderr != tc.stderrPart {
				t.Errorf("stderr %q, want %q", r.stderr, tc.stderrPart)
			}
			if tc.code == 0 && r.stderr != "" {
				t.Errorf("stderr %q, want empty", r.stderr)
			}
		})
	}
}

func TestReady_JSONPrintsBodyEvenWhenNotReady(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/status/ready": {status: 503, body: `{"ready":false,"reason":"no leader"}`}})
	r := runCLI(t, nil, "ready", "--addr", f.addr(), "-o", "json")
	wantExit(t, r, 1)
	var got api.Ready
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Ready || got.Reason != "no leader" {
		t.Fatalf("stdout %q (%v)", r.stdout, err)
	}
}

func TestReady_UnreachableExits1(t *testing.T) {
	f := newFakeAPI(t, nil)
	addr := f.addr()
	f.srv.Close()
	r := runCLI(t, nil, "ready", "--addr", addr, "--timeout", "2s")
	wantExit(t, r, 1)
	if !strings.HasPrefix(r.stderr, "roster: ") || !strings.Contains(r.stderr, addr) {
		t.Fatalf("stderr %q: want roster: ... naming %s", r.stderr, addr)
	}
}

func TestVersion_PrintsBuildAndFormats(t *testing.T) {
	want := buildinfo.Get()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, args...)
		wantExit(t, r, 0)
		for _, line := range []string{
			"roster " + want.Version + "\n",
			"commit:          " + want.ShortCommit() + "\n",
			"go:              " + want.GoVersion + " ",
			fmt.Sprintf("newest command:  %d (%s)\n", fsm.NewestType, fsm.NewestType),
			fmt.Sprintf("data format:     %d\n", datadir.Format),
			fmt.Sprintf("snapshot format: %d\n", snapshot.FormatVersion),
		} {
			if !strings.Contains(r.stdout, line) {
				t.Fatalf("roster %s: stdout %q lacks %q", strings.Join(args, " "), r.stdout, line)
			}
		}
	}
	r := runCLI(t, nil, "version", "-o", "json")
	wantExit(t, r, 0)
	var bi buildInfo
	if err := json.Unmarshal([]byte(r.stdout), &bi); err != nil || bi.Version != want.Version || bi.GoVersion == "" ||
		bi.NewestCommand != uint8(fsm.NewestType) || bi.NewestCommandName != fsm.NewestType.String() ||
		bi.DataFormat != datadir.Format || bi.SnapshotFormat != snapshot.FormatVersion {
		t.Fatalf("stdout %q (%v)", r.stdout, err)
	}
}

func TestRoot_UnknownCommandExits2(t *testing.T) {
	r := runCLI(t, nil, "frobnicate")
	wantExit(t, r, exitUsage)
	if !strings.HasPrefix(r.stderr, `roster: unknown command "frobnicate"`) {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// roster health shows the probe results, and each node's view of the last majority
// confirmation when there was one.
func TestHealth_TableWithConfirmationViews(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/namespaces/public/groups/DEFAULT_GROUP/services/db/health": {body: `{
		"namespace":"public","group":"DEFAULT_GROUP","service":"db","leader":"n1","probing":true,"results":[
		{"ip":"127.0.0.1","port":3306,"cluster":"DEFAULT","epoch":4,"checkType":"TCP","target":"127.0.0.1:3306","healthy":true,
		 "pending":false,"outcome":"denied","error":"address 127.0.0.1 is outside the probe policy","consecutiveSuccesses":0,
		 "consecutiveFailures":0,"rise":1,"fall":1,"interval":"1s",
		 "vantages":[{"node":"n1","answered":true,"healthy":false,"outcome":"denied"},{"node":"n2","answered":true,"healthy":true},
		             {"node":"n3","answered":false,"healthy":false,"error":"timeout"}]}]}`}})
	r := runCLI(t, nil, "health", "db", "--addr", f.addr())
	wantExit(t, r, 0)
	squeezed := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"LAST_CONFIRMATION", "n1:down n2:up n3:no answer"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}
