package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
)

// noneCluster creates cluster name of svc with check type NONE: nothing probes its
// instances.
func noneCluster(ctx context.Context, t *testing.T, c *client.Client, svc, name string) {
	t.Helper()
	if _, err := c.UpsertCluster(ctx, "", "", svc, name, api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: api.CheckNone}}); err != nil {
		t.Fatal(err)
	}
}

// instanceOf reads one instance of svc.
func instanceOf(ctx context.Context, t *testing.T, c *client.Client, svc, ip string, port int) api.Instance {
	t.Helper()
	res, _, err := c.Instance(ctx, "", "", svc, ip, port, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Instance
}

func TestUpdateCLI_ChangesOnlyWhatIsGiven(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	cl := c.Nodes[0].Client()
	addr := c.Nodes[0].HTTPAddr
	noneCluster(ctx, t, cl, "orders", "DEFAULT")
	noneCluster(ctx, t, cl, "orders", "west")
	if _, err := cl.RegisterInstance(ctx, "", "", "orders", "127.0.0.1", 9001, api.InstanceRequest{
		Weight: ptrTo(2.0), Metadata: map[string]string{"a": "1", "b": "2"}}); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, nil, "update", "orders", "127.0.0.1:9001", "--weight", "0.5", "--meta", "c=3", "--meta", "b=20", "--remove-meta", "a", "--addr", addr)
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "updated orders 127.0.0.1:9001 in public/DEFAULT_GROUP (index ") {
		t.Fatalf("stdout %q", r.stdout)
	}
	in := instanceOf(ctx, t, cl, "orders", "127.0.0.1", 9001)
	if in.Weight != 0.5 || !in.Enabled || in.Cluster != "DEFAULT" || !maps.Equal(in.Metadata, map[string]string{"b": "20", "c": "3"}) {
		t.Fatalf("after update: %+v", in)
	}

	r = runCLI(t, nil, "update", "orders", "127.0.0.1:9001", "--enabled=false", "--cluster", "west", "--addr", addr, "-o", "json")
	wantExit(t, r, 0)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index == 0 {
		t.Fatalf("update -o json: %v\n%s", err, r.stdout)
	}
	in = instanceOf(ctx, t, cl, "orders", "127.0.0.1", 9001)
	if in.Enabled || in.Cluster != "west" || in.Weight != 0.5 || len(in.Metadata) != 2 {
		t.Fatalf("after update: %+v", in)
	}

	// Removing the last keys leaves no metadata.
	wantExit(t, runCLI(t, nil, "update", "orders", "127.0.0.1:9001", "--remove-meta", "b", "--remove-meta", "c", "--addr", addr), 0)
	if in = instanceOf(ctx, t, cl, "orders", "127.0.0.1", 9001); len(in.Metadata) != 0 {
		t.Fatalf("metadata %v, want none", in.Metadata)
	}

	// Bad input exits 2, names the flag and changes nothing.
	before := instanceOf(ctx, t, cl, "orders", "127.0.0.1", 9001)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--weight", "20000"}, "--weight 20000: must be between 0 and 10000"},
		{[]string{"--weight", "-1"}, "--weight -1: must be between 0 and 10000"},
		{[]string{"--weight", "NaN"}, "--weight NaN"},
		{[]string{"--weight", "heavy"}, `invalid argument "heavy" for "--weight"`},
		{[]string{"--meta", "novalue"}, `--meta "novalue": want key=value`},
		{[]string{"--meta", "a=1", "--remove-meta", "a"}, `--meta and --remove-meta both name "a"`},
		{[]string{"--remove-meta", ""}, "--remove-meta: the key must not be empty"},
		{[]string{"--cluster", ""}, "--cluster must not be empty"},
		{[]string{"--enabled=maybe"}, `invalid argument "maybe" for "--enabled"`},
		{nil, "nothing to change"},
	} {
		r := runCLI(t, nil, append([]string{"update", "orders", "127.0.0.1:9001", "--addr", addr}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	wantExit(t, runCLI(t, nil, "update", "orders", "127.0.0.1", "--weight", "1", "--addr", addr), exitUsage)
	if after := instanceOf(ctx, t, cl, "orders", "127.0.0.1", 9001); after.ModifyIndex != before.ModifyIndex {
		t.Fatalf("bad input changed the instance: %+v, was %+v", after, before)
	}

	// A missing instance is an API error.
	r = runCLI(t, nil, "update", "orders", "127.0.0.1:9002", "--weight", "1", "--addr", addr)
	wantExit(t, r, exitError)
	r = runCLI(t, nil, "update", "orders", "127.0.0.1:9002", "--meta", "a=1", "--addr", addr)
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func ptrTo[T any](v T) *T { return &v }

// The metadata is merged into the instance as read and written only if it is still at
// the index read; an instance that keeps changing makes the command give up, exit 1.
func TestUpdate_MergesMetadataConditionally(t *testing.T) {
	inst := demoSvc + "/instances/127.100.0.7:80"
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET " + inst:   {body: `{"index":7,"instance":{"ip":"127.100.0.7","port":80,"metadata":{"a":"1","b":"2"},"modifyIndex":7}}`},
		"PATCH " + inst: {body: `{"index":8}`},
	})
	r := runCLI(t, nil, "update", "demo", "127.100.0.7:80", "--meta", "c=3", "--remove-meta", "a", "--weight", "4", "--addr", f.addr())
	wantExit(t, r, 0)
	f.mu.Lock()
	calls := append([]apiCall(nil), f.calls...)
	f.mu.Unlock()
	if len(calls) != 2 || calls[0].method != "GET" || calls[1].method != "PATCH" {
		t.Fatalf("calls %+v, want GET then PATCH", calls)
	}
	if got := calls[1].query; !maps.EqualFunc(got, url.Values{"cas": {"7"}}, func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }) {
		t.Fatalf("PATCH query %v, want cas=7", got)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(calls[1].body), &body); err != nil {
		t.Fatal(err)
	}
	if md, _ := body["metadata"].(map[string]any); len(md) != 2 || md["b"] != "2" || md["c"] != "3" || body["weight"] != 4.0 {
		t.Fatalf("PATCH body %s", calls[1].body)
	}

	lost := newFakeAPI(t, map[string]fakeRoute{
		"GET " + inst:   {body: `{"index":7,"instance":{"ip":"127.100.0.7","port":80,"modifyIndex":7}}`},
		"PATCH " + inst: {status: 409, body: `{"error":{"code":"cas_mismatch","message":"instance is at index 9","index":9}}`},
	})
	r = runCLI(t, nil, "update", "demo", "127.100.0.7:80", "--meta", "c=3", "--addr", lost.addr())
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "kept changing") || lost.callCount() != 2*casAttempts {
		t.Fatalf("stderr %q after %d calls", r.stderr, lost.callCount())
	}
}

func TestSetHealthCLI(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	cl := c.Nodes[0].Client()
	addr := c.Nodes[0].HTTPAddr
	noneCluster(ctx, t, cl, "batch", "DEFAULT")
	if _, err := cl.RegisterInstance(ctx, "", "", "batch", "127.0.0.1", 9100, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, nil, "set-health", "batch", "127.0.0.1:9100", "unhealthy", "--addr", addr)
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "set batch 127.0.0.1:9100 in public/DEFAULT_GROUP unhealthy (index ") {
		t.Fatalf("stdout %q", r.stdout)
	}
	if in := instanceOf(ctx, t, cl, "batch", "127.0.0.1", 9100); in.Healthy {
		t.Fatal("still healthy")
	}
	r = runCLI(t, nil, "set-health", "batch", "127.0.0.1:9100", "healthy", "--addr", addr, "-o", "json")
	wantExit(t, r, 0)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index == 0 {
		t.Fatalf("set-health -o json: %v\n%s", err, r.stdout)
	}
	before := instanceOf(ctx, t, cl, "batch", "127.0.0.1", 9100)
	if !before.Healthy {
		t.Fatal("still unhealthy")
	}

	for _, args := range [][]string{
		{"batch", "127.0.0.1:9100", "sick"},
		{"batch", "127.0.0.1:9100", "true"},
		{"batch", "127.0.0.1:9100"},
		{"batch", "127.0.0.1", "unhealthy"},
	} {
		if r := runCLI(t, nil, append(append([]string{"set-health"}, args...), "--addr", addr)...); r.code != exitUsage {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, r.code, r.stderr)
		}
	}
	if after := instanceOf(ctx, t, cl, "batch", "127.0.0.1", 9100); after.ModifyIndex != before.ModifyIndex {
		t.Fatalf("bad input changed the instance: %+v", after)
	}

	// A probed cluster owns its instances' health: a conflict, with the way out.
	if _, err := cl.UpsertCluster(ctx, "", "", "web", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: api.CheckTCP, Interval: "1h"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RegisterInstance(ctx, "", "", "web", "127.0.0.1", 9101, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "set-health", "web", "127.0.0.1:9101", "unhealthy", "--addr", addr)
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "(409 conflict)") || !strings.Contains(r.stderr, "roster cluster-config web CLUSTER --check none") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
