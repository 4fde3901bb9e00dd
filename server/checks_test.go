package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/mariadbtest"
	"github.com/rosterhq/roster/internal/tlstest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLogs sends every node's log, at debug level, to the returned buffer.
func captureLogs() (*syncBuffer, servertest.Option) {
	b := &syncBuffer{}
	return b, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// probeResult waits until the leader's last probe of the instance at port has the
// outcome and returns it.
func probeResult(ctx context.Context, t *testing.T, cl *client.Client, port int, outcome string) api.ProbeResult {
	t.Helper()
	var got api.ProbeResult
	wait.For(t, 15*time.Second, "probe outcome "+outcome, func() bool {
		res, err := cl.Health(ctx, ns, group, "svc")
		if err != nil {
			return false
		}
		for _, r := range res.Results {
			if r.Port == port && r.Outcome == outcome {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// rawCluster is the JSON body of GET .../clusters/{cluster}.
func rawCluster(ctx context.Context, t *testing.T, nd *servertest.Node, cluster string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
		nd.URL()+"/v1/namespaces/"+ns+"/groups/"+group+"/services/svc/clusters/"+cluster, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET cluster: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

func registerUnhealthy(ctx context.Context, t *testing.T, cl *client.Client, port int) {
	t.Helper()
	unhealthy := false
	if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", port, api.InstanceRequest{Healthy: &unhealthy}); err != nil {
		t.Fatal(err)
	}
}

// An HTTPS check through the API: healthy against a server whose certificate the
// cluster's CA verifies, unhealthy on an unexpected status or a wrong server name, and
// the health route shows the outcome and the certificate's expiry.
func TestHealth_HTTPSCheck(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg, expiry := ca.ServerConfig(t, "svc.test")
	var failing atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	port, _ := strconv.Atoi(portStr)

	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[0].Client()
	spec := func(name string) api.ClusterRequest {
		return api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "https", Path: "/ready", Interval: "1s",
			Timeout: "500ms", Rise: 1, Fall: 1, TLSServerName: name, TLSCAPEM: ca.PEM}}
	}
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", spec("svc.test")); err != nil {
		t.Fatal(err)
	}
	registerUnhealthy(ctx, t, cl, port)
	waitHealth(ctx, t, c, port, true, 15*time.Second)
	ok := probeResult(ctx, t, cl, port, "success")
	if ok.CheckType != api.CheckHTTPS || ok.Target != "https://127.0.0.1:"+portStr+"/ready" || ok.Status != 200 ||
		!ok.CertificateExpiry.Equal(expiry) {
		t.Fatalf("result %+v (certificate expiry want %v)", ok, expiry)
	}

	failing.Store(true)
	waitHealth(ctx, t, c, port, false, 15*time.Second)
	if r := probeResult(ctx, t, cl, port, "status"); r.Status != 503 {
		t.Fatalf("result %+v", r)
	}
	failing.Store(false)
	waitHealth(ctx, t, c, port, true, 15*time.Second)

	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", spec("other.test")); err != nil {
		t.Fatal(err)
	}
	waitHealth(ctx, t, c, port, false, 15*time.Second)
	if r := probeResult(ctx, t, cl, port, "tls"); r.Error != "certificate is not valid for other.test" || !r.CertificateExpiry.Equal(expiry) {
		t.Fatalf("result %+v", r)
	}

	// A refused spec names its field.
	bad := spec("svc.test")
	bad.HealthCheck.TLSCAPEM = "not PEM"
	_, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", bad)
	if err == nil || !strings.Contains(err.Error(), "healthCheck.tlsCaPem") {
		t.Fatalf("bad CA accepted or error without the field: %v", err)
	}
}

// A MYSQL check through the API against a real MariaDB: healthy while the server is up
// and the login works, unhealthy with outcome "auth failed" on a wrong password and
// "refused" once the server stops; the password shows nowhere (cluster reads, probe
// results, logs), and writing back the "***" a read shows keeps it.
func TestHealth_MySQLCheck(t *testing.T) {
	db := mariadbtest.Start(t)
	const password = "Xq7-probe-pw-3141"
	db.CreateUser(t, "probe", password)
	_, portStr, _ := net.SplitHostPort(db.Addr)
	port := db.Port

	logs, capture := captureLogs()
	c := servertest.New(t, 1, servertest.FastTimeouts(), capture)
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	nd := c.Nodes[0]
	cl := nd.Client()
	spec := func(pw string) api.ClusterRequest {
		return api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "MYSQL", User: "probe", Password: pw,
			Interval: "1s", Timeout: "900ms", Rise: 1, Fall: 1}}
	}
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", spec(password)); err != nil {
		t.Fatal(err)
	}
	registerUnhealthy(ctx, t, cl, port)
	waitHealth(ctx, t, c, port, true, 15*time.Second)
	if r := probeResult(ctx, t, cl, port, "success"); r.CheckType != api.CheckMySQL || r.Target != "127.0.0.1:"+portStr {
		t.Fatalf("result %+v", r)
	}
	raw := rawCluster(ctx, t, nd, "DEFAULT")
	if !strings.Contains(raw, `"user":"probe","password":"***","query":"SELECT 1"`) {
		t.Fatalf("cluster read: %s", raw)
	}

	// Read-modify-write: the spec read back, "***" included, keeps the password.
	got, _, err := cl.Cluster(ctx, ns, group, "svc", "DEFAULT", client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back := spec(got.Cluster.HealthCheck.Password)
	back.Metadata = map[string]string{"k": "v"}
	written := time.Now()
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", back); err != nil {
		t.Fatal(err)
	}
	// Probes after the write still log in: the password "***" stood for was kept (a
	// stored "***" would be a new spec, probed afresh, and refused by the server).
	wait.For(t, 15*time.Second, "two successful probes after the write-back", func() bool {
		res, err := cl.Health(ctx, ns, group, "svc")
		return err == nil && len(res.Results) == 1 && res.Results[0].Outcome == "success" &&
			res.Results[0].LastCheck.After(written.Add(time.Second)) && res.Results[0].ConsecutiveSuccesses >= 2
	})

	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", spec("wrong-"+password)); err != nil {
		t.Fatal(err)
	}
	waitHealth(ctx, t, c, port, false, 15*time.Second)
	if r := probeResult(ctx, t, cl, port, "auth failed"); r.Error != "access denied (MySQL error 1045)" {
		t.Fatalf("result %+v", r)
	}

	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", spec(password)); err != nil {
		t.Fatal(err)
	}
	waitHealth(ctx, t, c, port, true, 15*time.Second)
	db.Stop()
	waitHealth(ctx, t, c, port, false, 15*time.Second)
	probeResult(ctx, t, cl, port, "refused")

	res, err := cl.Health(ctx, ns, group, "svc")
	if err != nil {
		t.Fatal(err)
	}
	health, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"cluster read": rawCluster(ctx, t, nd, "DEFAULT"), "health route": string(health), "logs": logs.String()} {
		if strings.Contains(text, password) {
			t.Errorf("the password shows in the %s: %s", what, text)
		}
	}
	if !strings.Contains(logs.String(), "level=") {
		t.Fatal("no logs were captured")
	}
}

// With ACLs, a cluster write whose check carries a password — setting it, keeping it
// with "***", or replacing a spec that has one — needs operator write besides the
// namespace's write; a namespace writer still reads the spec, with the password
// redacted.
func TestACL_CheckPasswordNeedsOperatorWrite(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	writer := c.as(leader, c.token(ctx, t, "ns writer", api.ACLRules{Namespaces: map[string]string{ns: "write"}}).SecretID)
	operator := c.as(leader, c.token(ctx, t, "ns writer and operator",
		api.ACLRules{Namespaces: map[string]string{ns: "write"}, Operator: "write"}).SecretID)
	spec := func(pw string) api.ClusterRequest {
		return api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "MYSQL", User: "probe", Password: pw}}
	}
	put := func(cl *client.Client, req api.ClusterRequest) error {
		_, err := cl.UpsertCluster(ctx, ns, group, "svc", "db", req)
		return err
	}
	if err := put(writer, spec("")); err != nil {
		t.Fatalf("a MYSQL check without a password by a namespace writer: %v", err)
	}
	if err := put(writer, spec("s3cret-acl")); !client.IsPermissionDenied(err) {
		t.Fatalf("setting a password without operator write: %v, want 403", err)
	}
	if err := put(operator, spec("s3cret-acl")); err != nil {
		t.Fatalf("setting a password with operator write: %v", err)
	}
	for what, req := range map[string]api.ClusterRequest{
		"keeping it with ***": spec("***"),
		"changing it":         spec("other"),
		"dropping it":         {HealthCheck: &api.HealthCheckSpec{Type: "TCP"}},
	} {
		if err := put(writer, req); !client.IsPermissionDenied(err) {
			t.Fatalf("%s without operator write: %v, want 403", what, err)
		}
	}
	if err := put(operator, spec("***")); err != nil {
		t.Fatalf("keeping the password with operator write: %v", err)
	}
	got, _, err := writer.Cluster(ctx, ns, group, "svc", "db", client.QueryOptions{})
	if err != nil || got.Cluster.HealthCheck.Password != "***" || got.Cluster.HealthCheck.User != "probe" {
		t.Fatalf("read by the namespace writer: %+v %v", got.Cluster.HealthCheck, err)
	}
}
