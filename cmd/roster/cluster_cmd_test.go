package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/tlsutil"
)

// clusterOf reads cluster name of svc.
func clusterOf(ctx context.Context, t *testing.T, c *client.Client, svc, name string) api.Cluster {
	t.Helper()
	res, _, err := c.Cluster(ctx, "", "", svc, name, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Cluster
}

// Every flag of cluster-config lands in the cluster's health check; what is not given
// is kept; a change of type drops what does not apply to the new type.
func TestClusterConfigCLI_EditsTheHealthCheck(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	cl := c.Nodes[0].Client()
	addr := c.Nodes[0].HTTPAddr
	cc := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, nil, append(append([]string{"cluster-config"}, args...), "--addr", addr)...)
	}

	// Nothing to show yet.
	wantExit(t, cc("orders", "east"), exitError)

	r := cc("orders", "east", "--check", "HTTP", "--path", "/healthz", "--header", "X-Probe=roster", "--expected-status", "200,204",
		"--interval", "3s", "--check-timeout", "500ms", "--rise", "3", "--fall", "4", "--confirm", "leader",
		"--deregister-after", "1h", "--port", "8080", "--meta", "team=a")
	wantExit(t, r, 0)
	if !strings.Contains(r.stderr, "cluster east of orders in public/DEFAULT_GROUP written at index") {
		t.Fatalf("stderr %q", r.stderr)
	}
	got := clusterOf(ctx, t, cl, "orders", "east")
	want := api.HealthCheck{Type: api.CheckHTTP, Port: 8080, Path: "/healthz", Headers: map[string]string{"X-Probe": "roster"},
		ExpectedStatus: []int{200, 204}, Interval: api.Duration(3 * time.Second), Timeout: api.Duration(500 * time.Millisecond),
		Rise: 3, Fall: 4, Confirm: "leader", DeregisterAfter: api.Duration(time.Hour)}
	if !reflect.DeepEqual(got.HealthCheck, want) || got.Metadata["team"] != "a" {
		t.Fatalf("cluster %+v\nwant check %+v", got, want)
	}

	// The table shows it; -o json is the API's cluster.
	r = cc("orders", "east")
	wantExit(t, r, 0)
	squeezed := strings.Join(strings.Fields(r.stdout), " ")
	for _, s := range []string{"check http", "port 8080", "path /healthz", "headers X-Probe=roster", "expected-status 200,204",
		"interval 3s", "check-timeout 500ms", "rise 3", "fall 4", "confirm leader", "deregister-after 1h0m0s", "metadata team=a"} {
		if !strings.Contains(squeezed, s) {
			t.Errorf("table lacks %q:\n%s", s, r.stdout)
		}
	}

	// One flag changes one field; the rest is kept.
	r = cc("orders", "east", "--fall", "5", "--header", "X-Other=1", "--remove-header", "x-probe", "--meta", "tier=1", "-o", "json")
	wantExit(t, r, 0)
	var res api.ClusterResponse
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	want.Fall, want.Headers = 5, map[string]string{"X-Other": "1"}
	if !reflect.DeepEqual(res.Cluster.HealthCheck, want) || len(res.Cluster.Metadata) != 2 {
		t.Fatalf("cluster %+v\nwant check %+v", res.Cluster, want)
	}

	// Another type: the HTTP settings go, the others stay.
	wantExit(t, cc("orders", "east", "--check", "tcp", "--port", "0", "--remove-meta", "tier"), 0)
	got = clusterOf(ctx, t, cl, "orders", "east")
	if h := got.HealthCheck; h.Type != api.CheckTCP || h.Port != 0 || h.Path != "" || h.Headers != nil || h.ExpectedStatus != nil ||
		h.Rise != 3 || h.Fall != 5 || h.Confirm != "leader" || h.Interval != api.Duration(3*time.Second) || len(got.Metadata) != 1 {
		t.Fatalf("after --check tcp: %+v", got)
	}

	// HTTPS with the TLS options, the CA bundle read from a file.
	caFile, _, err := tlsutil.CreateCA(tlsutil.CAOptions{Dir: t.TempDir(), Days: 2})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, cc("orders", "east", "--check", "https", "--path", "/ready", "--tls-server-name", "127.0.0.1",
		"--tls-ca-bundle", caFile, "--tls-skip-verify=false"), 0)
	if h := clusterOf(ctx, t, cl, "orders", "east").HealthCheck; h.Type != api.CheckHTTPS || h.Path != "/ready" ||
		h.TLSServerName != "127.0.0.1" || h.TLSCAPEM != string(caPEM) || h.TLSSkipVerify {
		t.Fatalf("after --check https: %+v", h)
	}
	if r := cc("orders", "east"); !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "tls-ca-bundle 1 certificate(s) of the cluster") {
		t.Fatalf("table:\n%s", r.stdout)
	}

	// gRPC over TLS keeps the TLS options; without TLS they go.
	wantExit(t, cc("orders", "east", "--check", "grpc", "--grpc-service", "orders.v1.Orders", "--grpc-tls"), 0)
	if h := clusterOf(ctx, t, cl, "orders", "east").HealthCheck; h.Type != api.CheckGRPC || h.GRPCService != "orders.v1.Orders" ||
		!h.GRPCTLS || h.TLSServerName != "127.0.0.1" || h.TLSCAPEM == "" || h.Path != "" {
		t.Fatalf("after --check grpc --grpc-tls: %+v", h)
	}
	wantExit(t, cc("orders", "east", "--grpc-tls=false"), 0)
	if h := clusterOf(ctx, t, cl, "orders", "east").HealthCheck; h.GRPCTLS || h.TLSServerName != "" || h.TLSCAPEM != "" || h.GRPCService != "orders.v1.Orders" {
		t.Fatalf("after --grpc-tls=false: %+v", h)
	}

	// MySQL: the password comes from a file and is kept, unseen, by later changes.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantExit(t, cc("orders", "east", "--check", "mysql", "--user", "probe", "--password-file", pw, "--query", "SELECT 2"), 0)
	wantExit(t, cc("orders", "east", "--rise", "2"), 0)
	if h := clusterOf(ctx, t, cl, "orders", "east").HealthCheck; h.Type != api.CheckMySQL || h.User != "probe" ||
		h.Password != api.RedactedPassword || h.Query != "SELECT 2" || h.Rise != 2 || h.GRPCService != "" {
		t.Fatalf("after --check mysql: %+v", h)
	}
	if r := cc("orders", "east"); strings.Contains(r.stdout, "s3cret") || !strings.Contains(r.stdout, "set (never shown)") {
		t.Fatalf("table:\n%s", r.stdout)
	}

	// NONE: health by hand; the MySQL account is dropped.
	wantExit(t, cc("orders", "east", "--check", "none"), 0)
	if h := clusterOf(ctx, t, cl, "orders", "east").HealthCheck; h.Type != api.CheckNone || h.User != "" || h.Password != "" || h.Query != "" {
		t.Fatalf("after --check none: %+v", h)
	}

	// The default cluster, in another namespace and group, created by the command.
	wantExit(t, runCLI(t, nil, "cluster-config", "payments", "--namespace", "public", "--group", "g1", "--check", "none", "--addr", addr), 0)
	res2, _, err := cl.Cluster(ctx, "", "g1", "payments", api.DefaultCluster, client.QueryOptions{})
	if err != nil || res2.Cluster.HealthCheck.Type != api.CheckNone {
		t.Fatalf("payments DEFAULT: %+v (%v)", res2, err)
	}
}

// Bad flags exit 2 with a message naming the flag, and the cluster stays as it was.
func TestClusterConfigCLI_BadInputChangesNothing(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	cl := c.Nodes[0].Client()
	addr := c.Nodes[0].HTTPAddr
	wantExit(t, runCLI(t, nil, "cluster-config", "orders", "--check", "tcp", "--addr", addr), 0)
	before := clusterOf(ctx, t, cl, "orders", api.DefaultCluster)

	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--check", "icmp"}, `--check "icmp": want one of none, tcp, http, https, tls, grpc, mysql`},
		{[]string{"--confirm", "quorum"}, `--confirm "quorum": want majority or leader`},
		{[]string{"--port", "70000"}, "--port 70000"},
		{[]string{"--rise", "0"}, "--rise 0: must be between 1 and 10"},
		{[]string{"--fall", "11"}, "--fall 11"},
		{[]string{"--interval", "10ms"}, "--interval 10ms: must be between 1s and 1h0m0s"},
		{[]string{"--interval", "often"}, `invalid argument "often" for "--interval"`},
		{[]string{"--check-timeout", "0s"}, "--check-timeout 0s: must be positive"},
		{[]string{"--deregister-after", "-1h"}, "--deregister-after -1h0m0s"},
		{[]string{"--check", "http", "--path", "healthz"}, `--path "healthz": must start with /`},
		{[]string{"--check", "http", "--expected-status", "200,abc"}, `--expected-status "200,abc"`},
		{[]string{"--check", "http", "--expected-status", "99"}, `--expected-status "99"`},
		{[]string{"--check", "http", "--header", "X-A"}, `--header "X-A": want Name=value`},
		{[]string{"--check", "http", "--header", "X-A=1", "--remove-header", "x-a"}, "--header and --remove-header both name"},
		{[]string{"--check", "tcp", "--path", "/x"}, "--path applies to http and https checks only; the check is tcp"},
		{[]string{"--path", "/x"}, "--path applies to http and https checks only; the check is tcp"}, // the cluster's type
		{[]string{"--tls-server-name", "127.0.0.1"}, "--tls-server-name applies to https and tls checks"},
		// Without --grpc-tls, refused once the cluster read says it has no grpcTls.
		{[]string{"--check", "grpc", "--tls-skip-verify"}, "--tls-skip-verify applies to https and tls checks, and grpc checks with --grpc-tls only; the check is grpc"},
		{[]string{"--check", "https", "--user", "u"}, "--user applies to mysql checks only; the check is https"},
		{[]string{"--check", "mysql"}, "--user is required for a mysql check"},
		{[]string{"--check", "mysql", "--user", ""}, "--user must not be empty"},
		{[]string{"--check", "https", "--tls-ca-bundle", filepath.Join(dir, "missing.pem")}, "--tls-ca-bundle: open"},
		{[]string{"--check", "https", "--tls-ca-bundle", notPEM}, "no PEM CERTIFICATE block"},
		{[]string{"--check", "mysql", "--user", "u", "--password-file", filepath.Join(dir, "missing")}, "--password-file: open"},
		{[]string{"--meta", "novalue"}, `--meta "novalue": want key=value`},
		{[]string{"--meta", "a=1", "--remove-meta", "a"}, `--meta and --remove-meta both name "a"`},
		{[]string{"DEFAULT", "extra"}, "usage: roster cluster-config SERVICE [CLUSTER]"},
	} {
		r := runCLI(t, nil, append([]string{"cluster-config", "orders", "--addr", addr}, tc.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "roster: ") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if after := clusterOf(ctx, t, cl, "orders", api.DefaultCluster); !reflect.DeepEqual(after, before) {
		t.Fatalf("bad input changed the cluster:\n%+v\nwas\n%+v", after, before)
	}
}

// The cluster is written back conditionally on the index it was read at (cas=0 when it
// does not exist); the stored password travels as the redacted placeholder.
func TestClusterConfig_WritesConditionallyOnTheClusterRead(t *testing.T) {
	east := demoSvc + "/clusters/east"
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET " + east: {body: `{"index":12,"cluster":{"name":"east","healthCheck":{"type":"MYSQL","port":3306,"interval":"5s",
			"timeout":"2s","rise":2,"fall":3,"confirm":"majority","user":"probe","password":"***","query":"SELECT 1"},
			"metadata":{"team":"a"},"modifyIndex":12}}`},
		"PUT " + east: {body: `{"index":13}`},
	})
	r := runCLI(t, nil, "cluster-config", "demo", "east", "--interval", "10s", "--addr", f.addr(), "-o", "json")
	wantExit(t, r, 0)
	f.mu.Lock()
	calls := append([]apiCall(nil), f.calls...)
	f.mu.Unlock()
	if len(calls) != 3 || calls[1].method != "PUT" || calls[1].query.Get("cas") != "12" {
		t.Fatalf("calls %+v: want GET, PUT ?cas=12, GET", calls)
	}
	var got, want any
	_ = json.Unmarshal([]byte(calls[1].body), &got)
	_ = json.Unmarshal([]byte(`{"healthCheck":{"type":"MYSQL","port":3306,"interval":"10s","timeout":"2s","rise":2,"fall":3,
		"confirm":"majority","user":"probe","password":"***","query":"SELECT 1"},"metadata":{"team":"a"}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PUT body %s", calls[1].body)
	}

	absent := newFakeAPI(t, map[string]fakeRoute{"PUT " + east: {status: 409, body: `{"error":{"code":"cas_mismatch","message":"exists","index":4}}`}})
	r = runCLI(t, nil, "cluster-config", "demo", "east", "--check", "none", "--addr", absent.addr())
	wantExit(t, r, exitError)
	absent.mu.Lock()
	defer absent.mu.Unlock()
	if n := len(absent.calls); n != 2*casAttempts || absent.calls[1].query.Get("cas") != "0" || !strings.Contains(r.stderr, "kept changing") {
		t.Fatalf("%d calls (%+v), stderr %q", n, absent.calls[1], r.stderr)
	}
}
