package server_test

import (
	"context"
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

const (
	ns    = "public"
	group = "DEFAULT_GROUP"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func register(ctx context.Context, t *testing.T, c *client.Client, svc, ip string, port int) uint64 {
	t.Helper()
	idx, err := c.RegisterInstance(ctx, ns, group, svc, ip, port, api.InstanceRequest{Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatalf("register %s %s:%d via %s: %v", svc, ip, port, c.Addr(), err)
	}
	return idx
}

func addrs(in []api.Instance) map[string]int {
	out := map[string]int{}
	for _, i := range in {
		out[i.Addr()]++
	}
	return out
}

// A write sent to a follower is forwarded to the leader and is then readable
// linearizably from every node, with an index at least the write's.
func TestCluster_WriteViaFollowerReadableEverywhere(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	f := c.Followers()[0]
	idx := register(ctx, t, c.Nodes[f].Client(), "orders", "127.100.0.1", 5432)
	if idx == 0 {
		t.Fatal("write returned index 0")
	}
	for i, nd := range c.Nodes {
		resp, meta, err := nd.Client().Instances(ctx, ns, group, "orders", client.InstancesQuery{})
		if err != nil {
			t.Fatalf("node %d (leader=%v): %v", i, i == leader, err)
		}
		if len(resp.Instances) != 1 || resp.Instances[0].Addr() != "127.100.0.1:5432" || resp.Instances[0].Metadata["k"] != "v" {
			t.Fatalf("node %d: instances %+v", i, resp.Instances)
		}
		if meta.Index < idx || resp.Index < idx {
			t.Fatalf("node %d: read index %d/%d < write index %d", i, meta.Index, resp.Index, idx)
		}
	}
}

// Stopping the leader elects a new one and writes succeed through a surviving node;
// nothing acknowledged before is lost.
func TestCluster_LeaderFailover(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	old := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	for p := 1; p <= 20; p++ {
		register(ctx, t, c.Nodes[(old+1)%3].Client(), "db", "127.100.0.2", p)
	}
	c.Stop(old)
	start := time.Now()
	nl := c.MustLeader()
	if nl == old {
		t.Fatalf("stopped node %d still leader", old)
	}
	survivor := c.Nodes[c.Followers()[0]].Client()
	register(ctx, t, survivor, "db", "127.100.0.2", 21)
	t.Logf("failover to first write: %v", time.Since(start))
	for _, i := range []int{nl, c.Followers()[0]} {
		resp, _, err := c.Nodes[i].Client().Instances(ctx, ns, group, "db", client.InstancesQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Instances) != 21 {
			t.Fatalf("node %d has %d instances, want 21", i, len(resp.Instances))
		}
	}
}

// All three nodes stopped and restarted on the same data dirs: every acknowledged
// write is present exactly once and indexes do not go backwards.
func TestCluster_FullRestartKeepsAcknowledgedWrites(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	want := map[string]int{}
	var last uint64
	for p := 1; p <= 50; p++ {
		last = register(ctx, t, c.Nodes[p%3].Client(), "cache", "127.100.0.3", p)
		want[fmt.Sprintf("127.100.0.3:%d", p)] = 1
	}
	if _, err := c.Nodes[0].Client().DeregisterInstance(ctx, ns, group, "cache", "127.100.0.3", 7); err != nil {
		t.Fatal(err)
	}
	delete(want, "127.100.0.3:7")
	c.Close()
	for i := range c.Nodes {
		c.Start(i)
	}
	c.MustLeader()
	for i, nd := range c.Nodes {
		resp, meta, err := nd.Client().Instances(ctx, ns, group, "cache", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
		if err != nil {
			t.Fatal(err)
		}
		got := addrs(resp.Instances)
		if len(got) != len(want) {
			t.Fatalf("node %d: %d instances after restart, want %d", i, len(got), len(want))
		}
		for a, n := range got {
			if n != 1 || want[a] != 1 {
				t.Fatalf("node %d: instance %s appears %d times (wanted %d)", i, a, n, want[a])
			}
		}
		if meta.Index < last {
			t.Fatalf("node %d: index went back from %d to %d", i, last, meta.Index)
		}
	}
}

// A blocking query returns promptly when the service changes and at the wait otherwise.
func TestCluster_BlockingQuery(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	cl := c.Nodes[c.Followers()[0]].Client()
	idx := register(ctx, t, cl, "web", "127.100.0.4", 80)

	type res struct {
		resp api.InstancesResponse
		meta client.Meta
		err  error
	}
	// No change to the service: returns at the wait with the same index. Another
	// service is written until the query returns, so writes land while it is parked;
	// none may wake it.
	const quiet = 300 * time.Millisecond
	start := time.Now()
	parked := make(chan res, 1)
	go func() {
		r, meta, err := cl.Instances(ctx, ns, group, "web", client.InstancesQuery{QueryOptions: client.QueryOptions{WaitIndex: idx, WaitTime: quiet}})
		parked <- res{r, meta, err}
	}()
	var r res
	for port, returned := 1, false; !returned; port++ {
		register(ctx, t, cl, "other", "127.100.0.9", port)
		select {
		case r = <-parked:
			returned = true
		default:
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if el := time.Since(start); el < quiet {
		t.Fatalf("blocking query returned after %v, before the wait: another service's write woke it", el)
	}
	if r.meta.Index != idx {
		t.Fatalf("index changed without a write to the service: %d -> %d", idx, r.meta.Index)
	}

	// A change: returns long before the 30 s wait.
	done := make(chan res, 1)
	go func() {
		r, meta, err := cl.Instances(ctx, ns, group, "web", client.InstancesQuery{QueryOptions: client.QueryOptions{WaitIndex: idx, WaitTime: 30 * time.Second}})
		done <- res{r, meta, err}
	}()
	w := register(ctx, t, cl, "web", "127.100.0.4", 81)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.resp.Index < w || len(r.resp.Instances) != 2 {
			t.Fatalf("woke with index %d (write %d), %d instances", r.resp.Index, w, len(r.resp.Instances))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocking query did not return after a change")
	}
}

// Bad input is refused with a 400 naming the field and never reaches the Raft log.
func TestCluster_BadInputDoesNotTouchLog(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	// A NONE cluster: no probe may commit a health transition during the test.
	if _, err := c.Nodes[l].Client().UpsertCluster(ctx, ns, group, "svc", "DEFAULT",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	register(ctx, t, c.Nodes[l].Client(), "svc", "127.100.0.5", 1)
	c.WaitSettled() // the leader's own writes (identity, member records) are done
	r := c.Nodes[l].Server.Node().Raft()
	before := r.LastIndex()
	base := "http://" + c.Nodes[c.Followers()[0]].HTTPAddr + "/v1/namespaces/public/groups/DEFAULT_GROUP/services/"
	cases := []struct {
		method, path, body, field string
	}{
		{"PUT", "svc/instances/127.100.0.5:70000", `{}`, "port"},
		{"PUT", "svc/instances/not_an_ip!:80", `{}`, "ip"},
		{"PUT", "svc/instances/127.100.0.5:80", `{"weight":10001}`, "weight"},
		{"PUT", "svc/instances/127.100.0.5:80", `{"cluster":"bad cluster"}`, "cluster"},
		{"PUT", "svc/instances/127.100.0.5:80", `{"metadata":{"k":"` + strings.Repeat("x", 2000) + `"}}`, "metadata"},
		{"PUT", "svc/instances/127.100.0.5:80", `{"nope":1}`, "nope"},
		{"PUT", "svc", `{"protectThreshold":2}`, "protectThreshold"},
		{"PUT", "svc/clusters/DEFAULT", `{"healthCheck":{"type":"HTTP","interval":"500ms"}}`, "healthCheck.interval"},
		{"PUT", "svc/clusters/DEFAULT", `{"healthCheck":{"rise":11}}`, "healthCheck.rise"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorBody
		err = decodeJSON(resp, &body)
		if resp.StatusCode != 400 || err != nil || body.Error.Field != tc.field {
			t.Errorf("%s %s %s: status %d field %q (want 400 %q) err %v", tc.method, tc.path, tc.body, resp.StatusCode, body.Error.Field, tc.field, err)
		}
	}
	if after := r.LastIndex(); after != before {
		t.Fatalf("raft last index moved from %d to %d on bad input", before, after)
	}
}

// With no quorum, a write is answered 503 within the request timeout, never hangs.
func TestCluster_WriteWithoutLeaderIs503(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	survivor := (l + 1) % 3
	for i := range c.Nodes {
		if i != survivor {
			c.Stop(i)
		}
	}
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	_, err := c.Nodes[survivor].Client().RegisterInstance(ctx, ns, group, "x", "127.100.0.6", 1, api.InstanceRequest{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("write without quorum: %v, want a 503", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("503 took %v", el)
	}
}

// --pprof serves the profiling endpoints next to the API; without it they are 404.
func TestServer_Pprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := servertest.New(t, 1, servertest.FastTimeouts(), func(cfg *server.Config) { cfg.Pprof = on })
		c.MustLeader()
		resp, err := http.Get("http://" + c.Nodes[0].HTTPAddr + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Fatalf("pprof=%v: status %d, want %d", on, resp.StatusCode, want)
		}
		ready, err := c.Nodes[0].Client().Ready(ctxT(t, 10*time.Second))
		if err != nil || !ready.Ready {
			t.Fatalf("pprof=%v: API behind the profiling mux: %+v %v", on, ready, err)
		}
		c.Close()
	}
}

// A node started with Join and no state asks the member at that address (given as a
// URL) to add it; the leader adds it as a voter and records its HTTP address.
func TestServer_JoinThroughAMember(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	s := startJoiner(t, "n2", "http://"+c.Nodes[0].HTTPAddr+"/", server.TLSConfig{}, nil)
	ctx := ctxT(t, 20*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, _, err := c.Nodes[0].Client().Members(ctx, client.QueryOptions{})
		if err == nil && len(res.Members) == 2 {
			m := res.Members[1]
			if m.ID == "n2" && m.Voter && m.HTTPAddr == s.HTTPAddr() && m.RaftAddr == s.Node().RaftAddr() {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("n2 did not join: %+v %v", res, err)
		case <-tick.C:
		}
	}
}

// Every node reports its data directory's disk on /metrics.
func TestServer_DiskMetrics(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	resp, err := http.Get("http://" + c.Nodes[0].HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"roster_disk_free_bytes", "roster_disk_total_bytes"} {
		var v float64
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, name+" ") {
				found = true
				if _, err := fmt.Sscan(strings.TrimPrefix(line, name+" "), &v); err != nil || v <= 0 {
					t.Fatalf("%s: %q", name, line)
				}
			}
		}
		if !found {
			t.Fatalf("no %s on /metrics", name)
		}
	}
}

// GET /v1/cluster/members?detail=true: the node that answers asks every member for its
// readiness (over HTTPS in a TLS cluster) and shows its applied index and lag; a member
// that does not answer is shown unreachable, with the reason, and the list still comes.
func TestMembers_DetailAsksEveryMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []servertest.Option
	}{
		{"plain", nil},
		{"tls", []servertest.Option{servertest.WithTLS()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := servertest.New(t, 3, append([]servertest.Option{servertest.FastTimeouts()}, tc.opts...)...)
			leader := c.MustLeader()
			ctx := ctxT(t, 30*time.Second)
			idx := register(ctx, t, c.Nodes[leader].Client(), "orders", "127.100.0.1", 5000)
			if err := c.WaitApplied(ctx, idx); err != nil {
				t.Fatal(err)
			}
			cl := c.Nodes[leader].Client()
			wait.For(t, 10*time.Second, "every member ready and caught up in the detailed list", func() bool {
				res, _, err := cl.MembersWithStatus(ctx, client.QueryOptions{})
				if err != nil || len(res.Members) != 3 {
					return false
				}
				for _, m := range res.Members {
					st := m.Status
					if st == nil || !st.Reachable || !st.Ready || st.AppliedIndex < idx || st.Lag != 0 || st.Error != "" {
						return false
					}
				}
				return true
			})
			plain, _, err := cl.Members(ctx, client.QueryOptions{})
			if err != nil || len(plain.Members) != 3 || plain.Members[0].Status != nil {
				t.Fatalf("the list without detail: %+v %v", plain, err)
			}

			stopped := c.Followers()[0]
			c.Stop(stopped)
			res, _, err := cl.MembersWithStatus(ctx, client.QueryOptions{})
			if err != nil || len(res.Members) != 3 {
				t.Fatalf("detail with a member down: %+v %v", res, err)
			}
			for _, m := range res.Members {
				down := m.ID == c.Nodes[stopped].ID
				if m.Status == nil || m.Status.Reachable == down || (down && m.Status.Error == "") {
					t.Errorf("member %s (down %v): status %+v", m.ID, down, m.Status)
				}
			}
		})
	}
}
