package server_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/nacosrpc"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server/servertest"
)

// A Nacos gRPC registration at a follower reaches the leader typed: the follower's
// registry hands the write, encoded once, to the leader over one peer RPC call, and the
// leader's log entry is that encoding (no second encoding anywhere, no HTTP hop).
func TestForward_NacosGRPCWriteAtAFollowerIsOneTypedHop(t *testing.T) {
	c := servertest.New(t, 3, steadyTimeouts, servertest.WithGRPC())
	leader := c.Nodes[c.MustLeader()]
	c.WaitSettled()
	ctx := ctxT(t, 60*time.Second)
	_, err := leader.Client().UpsertCluster(ctx, "public", "g", "orders", "c1", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}})
	noErr(t, err)
	f := c.Nodes[c.Followers()[0]]
	rpc, err := nacosrpc.Dial(ctx, f.Server.GRPCAddr())
	noErr(t, err)
	t.Cleanup(func() { _ = rpc.Close() })

	// The process encodes for every node: measure a registration during which the
	// leader wrote nothing of its own (its log grew by exactly this write).
	attemptsOf := func() float64 { return metricValue(ctx, t, f, "roster_registry_forward_attempts_total") }
	servedOf := func() float64 {
		return metricValue(ctx, t, leader, `roster_registry_forwards_served_total{result="ok"}`)
	}
	var encodes, entries uint64
	var attempts, served float64
	for try := 0; ; try++ {
		c.WaitSettled()
		e0, a0, s0 := fsm.Encodes(), attemptsOf(), servedOf()
		i0 := leader.Server.Node().Raft().LastIndex()
		m, err := rpc.RegisterPersistent(ctx, "g", "orders", "c1", "127.0.0.1", 30000+try, 2, map[string]string{"zone": "a"})
		if err != nil || m["resultCode"] != float64(200) {
			t.Fatalf("registration at the follower: %v %v", m, err)
		}
		entries = leader.Server.Node().Raft().LastIndex() - i0
		encodes = fsm.Encodes() - e0
		attempts, served = attemptsOf()-a0, servedOf()-s0
		if entries == 1 || try == 4 {
			break
		}
	}
	if entries != 1 || encodes != 1 || attempts != 1 || served != 1 {
		t.Fatalf("one registration at a follower: %d log entries, %d encodings, %v peer RPC calls, %v served by the leader; want 1 of each",
			entries, encodes, attempts, served)
	}
	in, found := instanceOn(t, leader, model.InstanceRef{Namespace: "public", Group: "g", Service: "orders", IP: "127.0.0.1", Port: 30000})
	if !found || in.Weight != 2 || in.Cluster != "c1" || in.Metadata["zone"] != "a" {
		t.Fatalf("the leader holds %+v (found %v)", in, found)
	}
}

// instanceOn reads an instance from a node's state.
func instanceOn(t *testing.T, nd *servertest.Node, ref model.InstanceRef) (model.Instance, bool) {
	t.Helper()
	var out model.Instance
	var found bool
	wait.For(t, 10*time.Second, "the instance to be applied", func() bool {
		_, in, err := nd.Server.Store().Instance(nil, ref)
		out, found = in, err == nil
		return found
	})
	return out, found
}

// Native REST and Nacos HTTP requests at a follower are served there: writes go to the
// leader typed (one peer call each, none forwarded over HTTP), and a consistent read
// asks the leader for a read index, then reads the follower's own state, so it sees a
// write the leader acknowledged a moment before.
func TestForward_HTTPAtAFollowerIsServedThere(t *testing.T) {
	c := servertest.New(t, 3, steadyTimeouts)
	leader := c.Nodes[c.MustLeader()]
	c.WaitSettled()
	ctx := ctxT(t, 60*time.Second)
	f := c.Nodes[c.Followers()[0]]
	const svc = "/v1/namespaces/public/groups/g/services/orders"
	do := func(nd *servertest.Node, method, target, contentType, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+nd.HTTPAddr+target, strings.NewReader(body))
		noErr(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		noErr(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		noErr(t, err)
		return resp.StatusCode, string(b), resp.Header
	}
	metric := func(nd *servertest.Node, series string) float64 { return metricValue(ctx, t, nd, series) }
	httpForwards := func() float64 {
		var n float64
		for _, o := range []string{"ok", "retry", "error", "no_leader", "loop"} {
			n += metric(f, `roster_http_forwarded_total{outcome="`+o+`"}`)
		}
		return n
	}
	fwd0, att0 := httpForwards(), metric(f, "roster_registry_forward_attempts_total")
	ri0 := metric(f, `roster_registry_read_index_total{result="ok"}`)

	writes := []struct{ method, target, contentType, body string }{
		{"PUT", svc + "/clusters/c1", "application/json", `{"healthCheck":{"type":"NONE"}}`},
		{"PUT", svc + "/instances/127.0.0.1:7001", "application/json", `{"cluster":"c1"}`},
		{"PATCH", svc + "/instances/127.0.0.1:7001", "application/json", `{"weight":3}`},
		{"POST", "/nacos/v1/ns/instance", "application/x-www-form-urlencoded",
			"serviceName=orders&groupName=g&ip=127.0.0.1&port=7002&clusterName=c1&ephemeral=false"},
		{"PUT", "/nacos/v1/ns/instance", "application/x-www-form-urlencoded",
			"serviceName=orders&groupName=g&ip=127.0.0.1&port=7002&clusterName=c1&weight=5&ephemeral=false"},
		{"DELETE", svc + "/instances/127.0.0.1:7001", "", ""},
	}
	for _, w := range writes {
		code, body, h := do(f, w.method, w.target, w.contentType, w.body)
		if code != http.StatusOK {
			t.Fatalf("%s %s at the follower: %d %s", w.method, w.target, code, body)
		}
		if by := h.Get(api.HeaderServedBy); by != f.ID {
			t.Fatalf("%s %s: served by %q, want the follower %s", w.method, w.target, by, f.ID)
		}
	}
	// A write at the leader, then reads at the follower in every mode that is not stale.
	code, body, _ := do(leader, "PUT", svc+"/instances/127.0.0.1:7003", "application/json", `{"cluster":"c1"}`)
	if code != http.StatusOK {
		t.Fatalf("a write at the leader: %d %s", code, body)
	}
	reads := []string{
		svc + "/instances/127.0.0.1:7003",
		svc + "/instances/127.0.0.1:7003?consistency=leader",
		"/nacos/v1/ns/instance?serviceName=orders&groupName=g&ip=127.0.0.1&port=7003&cluster=c1",
	}
	for _, target := range reads {
		code, body, h := do(f, "GET", target, "", "")
		if code != http.StatusOK || !strings.Contains(body, "127.0.0.1") {
			t.Fatalf("GET %s at the follower right after the leader's write: %d %s", target, code, body)
		}
		if by := h.Get(api.HeaderServedBy); by != f.ID {
			t.Fatalf("GET %s: served by %q, want the follower", target, by)
		}
	}
	if n := httpForwards() - fwd0; n != 0 {
		t.Fatalf("%v requests forwarded over HTTP, want none", n)
	}
	// Nacos's update and deregistration read the service first (a leader-mode read).
	if n := metric(f, "roster_registry_forward_attempts_total") - att0; n != float64(len(writes)) {
		t.Fatalf("%v peer calls for %d writes", n, len(writes))
	}
	if n := metric(f, `roster_registry_read_index_total{result="ok"}`) - ri0; n < float64(len(reads)) {
		t.Fatalf("%v read indexes for %d reads", n, len(reads))
	}
	in, found := instanceOn(t, leader, model.InstanceRef{Namespace: "public", Group: "g", Service: "orders", IP: "127.0.0.1", Port: 7002})
	if !found || in.Weight != 5 {
		t.Fatalf("the leader holds %+v (found %v)", in, found)
	}
	if _, _, err := leader.Server.Store().Instance(nil, model.InstanceRef{Namespace: "public", Group: "g", Service: "orders", IP: "127.0.0.1", Port: 7001}); err == nil {
		t.Fatal("the deregistered instance is still on the leader")
	}
}

// A write at a node that reaches no leader within the hold is refused, nothing written,
// in the shape of the API it came through: the native API's no_leader, Nacos's 503 with
// code 30000 (v2) or its text (v1).
func TestForward_NoLeaderInEachAPIsShape(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	c.WaitSettled()
	var alone *servertest.Node
	for i := range c.Nodes {
		if i != l {
			alone = c.Nodes[i]
		}
	}
	for i := range c.Nodes {
		if c.Nodes[i] != alone {
			c.Stop(i)
		}
	}
	ctx := ctxT(t, 60*time.Second)
	post := func(path, form string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+alone.HTTPAddr+path, strings.NewReader(form))
		noErr(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		noErr(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		noErr(t, err)
		return resp.StatusCode, string(b)
	}
	const form = "serviceName=orders&ip=127.0.0.1&port=7100&ephemeral=false"
	if code, body := post("/nacos/v2/ns/instance", form); code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":30000`) {
		t.Fatalf("Nacos v2 with no leader: %d %s", code, body)
	}
	if code, body := post("/nacos/v1/ns/instance", form); code != http.StatusServiceUnavailable || strings.HasPrefix(body, "{") || !strings.Contains(body, "no leader") {
		t.Fatalf("Nacos v1 with no leader: %d %s", code, body)
	}
	_, err := alone.Client().RegisterInstance(ctx, "public", "DEFAULT_GROUP", "orders", "127.0.0.1", 7101, api.InstanceRequest{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeNoLeader {
		t.Fatalf("native with no leader: %v", err)
	}
}
