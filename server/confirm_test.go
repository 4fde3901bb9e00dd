package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// denyOn gives each named node a probe policy that denies the given addresses (on top
// of the loopback-only allow list): such a node cannot reach them, so it stands for a
// node with a partial view of the network.
func denyOn(deny map[string]string) servertest.Option {
	return func(c *server.Config) {
		if d, ok := deny[c.NodeID]; ok {
			p, err := healthcheck.ParsePolicy(healthcheck.LoopbackOnly, d)
			if err != nil {
				panic(err)
			}
			c.Health.Policy = p
		}
	}
}

// newBackendAt is a backend listening on ip.
func newBackendAt(t *testing.T, ip string) *backend { return testnet.New(t, ip) }

// A majority decides, not the leader alone (confirm: majority, the default). The
// leader is n1. Instance A is out of n1's reach only: its failing probes are overruled
// by n2 and n3, and A stays healthy. Instance B is out of reach of n1 and n2: it turns
// unhealthy. Instance C is out of reach of n2 and n3: when its listener closes it turns
// unhealthy (everyone agrees), and when it opens again only the leader sees it, so it
// stays unhealthy. The health results show each node's view. With confirm: leader, the
// leader alone turns A unhealthy.
func TestHealth_MajorityConfirmation(t *testing.T) {
	const ipA, ipB, ipC = "127.0.0.77", "127.0.0.78", "127.0.0.79"
	c := servertest.New(t, 3, servertest.FastTimeouts(), denyOn(map[string]string{
		"n1": ipA + "/32," + ipB + "/32",
		"n2": ipB + "/32," + ipC + "/32",
		"n3": ipC + "/32",
	}))
	leader := c.MustLeader()
	ctx := ctxT(t, 90*time.Second)
	if c.Nodes[leader].ID != "n1" {
		if err := c.Nodes[leader].Client().TransferLeadership(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 10*time.Second, "n1 to lead", func() bool { return c.Leader() == 0 })
	}
	cl := c.Nodes[1].Client()
	// The leader asks the others at the HTTP addresses they announce after the
	// election: until then a confirmation finds no majority of the voters.
	c.WaitSettled()
	// Probe every second, one failure or success decides (the leader's view), then the
	// others are asked.
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: "1s", Timeout: "300ms", Rise: 1, Fall: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	a, b, cb := newBackendAt(t, ipA), newBackendAt(t, ipB), newBackendAt(t, ipC)
	for _, be := range []*backend{a, b, cb} {
		host, _, _ := net.SplitHostPort(be.Addr())
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", host, be.Port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// views returns the vantages of an instance's last confirmation, by node.
	views := func(ip string) map[string]api.Vantage {
		res, err := cl.Health(ctx, ns, group, "svc")
		if err != nil {
			return nil
		}
		for _, r := range res.Results {
			if r.IP == ip && len(r.Vantages) == 3 {
				m := map[string]api.Vantage{}
				for _, v := range r.Vantages {
					m[v.Node] = v
				}
				return m
			}
		}
		return nil
	}

	// B: two of three cannot reach it.
	waitHealthAt(ctx, t, c, ipB, b.Port(), false, 20*time.Second)
	vb := views(ipB)
	if vb["n1"].Healthy || vb["n2"].Healthy || vb["n2"].Outcome != "denied" || !vb["n3"].Healthy || !vb["n3"].Answered {
		t.Fatalf("B's views: %+v", vb)
	}

	// A: only the leader cannot reach it. Its transition is asked about and overruled,
	// again and again, and A stays healthy.
	wait.For(t, 20*time.Second, "A's transition overruled twice", func() bool {
		v := views(ipA)
		return v != nil && !v["n1"].Healthy && v["n1"].Outcome == "denied" && v["n2"].Healthy && v["n3"].Healthy &&
			metric(t, c.Nodes[0], "roster_health_transitions_overruled_total") >= 2
	})
	if res, _, err := cl.Instance(ctx, ns, group, "svc", ipA, a.Port(), client.QueryOptions{Consistency: api.ConsistencyStale}); err != nil || !res.Instance.Healthy {
		t.Fatalf("A after its transitions were overruled: %+v %v", res.Instance, err)
	}

	// C: everyone agrees it is down; then only the leader sees it up again.
	cb.Close()
	waitHealthAt(ctx, t, c, ipC, cb.Port(), false, 20*time.Second)
	before := metric(t, c.Nodes[0], "roster_health_transitions_overruled_total")
	cb.Reopen()
	wait.For(t, 20*time.Second, "C's recovery overruled", func() bool {
		v := views(ipC)
		return v != nil && v["n1"].Healthy && !v["n2"].Healthy && !v["n3"].Healthy &&
			metric(t, c.Nodes[0], "roster_health_transitions_overruled_total") > before
	})
	if res, _, err := cl.Instance(ctx, ns, group, "svc", ipC, cb.Port(), client.QueryOptions{Consistency: api.ConsistencyStale}); err != nil || res.Instance.Healthy {
		t.Fatalf("C after its recovery was overruled: %+v %v", res.Instance, err)
	}

	// With confirm: leader the leader's view alone decides: A turns unhealthy.
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: "1s", Timeout: "300ms", Rise: 1, Fall: 1, Confirm: "leader",
	}}); err != nil {
		t.Fatal(err)
	}
	waitHealthAt(ctx, t, c, ipA, a.Port(), false, 20*time.Second)
}

// probeGates hold each node's health probes of one address until the node's gate
// opens, whatever the probe's deadline: a node whose gate is shut stands for one too
// loaded to answer a confirmation in time.
type probeGates struct {
	addr  string
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func newProbeGates(addr string, nodes ...string) *probeGates {
	g := &probeGates{addr: addr, gates: map[string]chan struct{}{}}
	for _, n := range nodes {
		g.gates[n] = make(chan struct{})
	}
	return g
}

// option makes every node probe through its gate.
func (g *probeGates) option(t *testing.T) servertest.Option {
	return func(c *server.Config) {
		gate := g.gates[c.NodeID]
		c.Health.Policy = servertest.LoopbackPolicy()
		next := c.Health.Policy.Dialer()
		c.Health.Dial = servertest.GuardDial(t, func(ctx context.Context, network, address string) (net.Conn, error) {
			if address == g.addr {
				<-gate
			}
			return next(ctx, network, address)
		})
	}
}

// open lets a node's probes through (again a no-op once open).
func (g *probeGates) open(node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gates[node]:
	default:
		close(g.gates[node])
	}
}

// A transition needs a majority of the voters, not of the nodes that answered. The
// leader's probes see an instance go down while both followers cannot answer (their
// probes hang past the confirmation's deadline): nothing is committed, the instance
// stays healthy on every node, and roster_health_confirm_inconclusive_total counts each
// round. Once one follower answers (the other still silent, as with one voter of three
// down), the leader and it are a majority and the transition commits.
func TestHealth_ConfirmationNeedsAMajorityOfVoters(t *testing.T) {
	b := newBackend(t)
	gates := newProbeGates(b.Addr(), "n1", "n2", "n3")
	c := servertest.New(t, 3, servertest.FastTimeouts(), gates.option(t))
	t.Cleanup(func() { // before the cluster stops: no probe may stay held
		for _, n := range []string{"n1", "n2", "n3"} {
			gates.open(n)
		}
	})
	leader := c.MustLeader()
	leaderID := c.Nodes[leader].ID
	gates.open(leaderID)
	var silent []string
	for _, nd := range c.Nodes {
		if nd.ID != leaderID {
			silent = append(silent, nd.ID)
		}
	}
	ctx := ctxT(t, 90*time.Second)
	cl := c.Nodes[leader].Client()
	c.WaitSettled()
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: "1s", Timeout: "300ms", Rise: 1, Fall: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.Port(), api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	views := func() map[string]api.Vantage {
		res, err := cl.Health(ctx, ns, group, "svc")
		if err != nil || len(res.Results) != 1 || len(res.Results[0].Vantages) != 3 {
			return nil
		}
		m := map[string]api.Vantage{}
		for _, v := range res.Results[0].Vantages {
			m[v.Node] = v
		}
		return m
	}
	const inconclusive = `roster_health_confirm_inconclusive_total{reason="unanswered"}`

	// Both followers silent: the leader alone is not a majority of three voters.
	b.Close()
	wait.For(t, 30*time.Second, "two inconclusive confirmations", func() bool {
		return metric(t, c.Nodes[leader], inconclusive) >= 2
	})
	v := views()
	if v == nil || v[leaderID].Healthy || v[silent[0]].Answered || v[silent[1]].Answered {
		t.Fatalf("views of an unanswered confirmation: %+v", v)
	}
	for _, nd := range c.Nodes {
		res, _, err := nd.Client().Instance(ctx, ns, group, "svc", "127.0.0.1", b.Port(), client.QueryOptions{Consistency: api.ConsistencyStale})
		if err != nil || !res.Instance.Healthy {
			t.Fatalf("%s: the instance after confirmations no follower answered: %+v %v", nd.ID, res.Instance, err)
		}
	}
	if got := metric(t, c.Nodes[leader], "roster_health_transitions_overruled_total"); got != 0 {
		t.Fatalf("overruled = %v for confirmations nobody answered", got)
	}

	// One follower answers, the other stays silent: two of three voters agree.
	gates.open(silent[0])
	waitHealth(ctx, t, c, b.Port(), false, 30*time.Second)
	wait.For(t, 10*time.Second, "the views of the confirmed transition", func() bool {
		v := views()
		return v != nil && v[silent[0]].Answered && !v[silent[0]].Healthy && !v[silent[1]].Answered
	})
}

// metric reads a counter of a node's /metrics (0 when it is not there).
func metric(t *testing.T, nd *servertest.Node, name string) float64 {
	t.Helper()
	resp, err := http.Get(nd.URL() + "/metrics")
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return 0
}
