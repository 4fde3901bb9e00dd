package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// backend is a real TCP listener an instance points at; Close/Reopen make it fail/pass probes.
type backend struct {
	t    *testing.T
	addr string
	ln   net.Listener
}

func newBackend(t *testing.T) *backend {
	b := &backend{t: t, addr: servertest.FreePort(t)}
	b.Reopen()
	t.Cleanup(b.Close)
	return b
}

func (b *backend) Reopen() {
	b.t.Helper()
	var ln net.Listener
	wait.For(b.t, 5*time.Second, "listening again on "+b.addr, func() bool {
		var err error
		ln, err = net.Listen("tcp", b.addr)
		return err == nil
	})
	b.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
}

func (b *backend) Close() {
	if b.ln != nil {
		_ = b.ln.Close()
		b.ln = nil
	}
}

func (b *backend) port() int {
	_, p, _ := net.SplitHostPort(b.addr)
	var n int
	for _, c := range p {
		n = n*10 + int(c-'0')
	}
	return n
}

const (
	probeInterval = time.Second
	probeTimeout  = 300 * time.Millisecond
	probeFall     = 2
)

// probedService creates service "svc" whose DEFAULT cluster is TCP-probed every second.
func probedService(ctx context.Context, t *testing.T, c *client.Client) {
	t.Helper()
	_, err := c.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: probeInterval.String(), Timeout: probeTimeout.String(), Rise: 2, Fall: probeFall,
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// waitHealth polls every running node (stale reads) until the instance has the wanted
// health everywhere, and returns how long it took.
func waitHealth(ctx context.Context, t *testing.T, cl *servertest.Cluster, port int, want bool, within time.Duration) time.Duration {
	t.Helper()
	return waitHealthAt(ctx, t, cl, "127.0.0.1", port, want, within)
}

// waitHealthAt is waitHealth for an instance at ip.
func waitHealthAt(ctx context.Context, t *testing.T, cl *servertest.Cluster, ip string, port int, want bool, within time.Duration) time.Duration {
	t.Helper()
	return wait.For(t, within, fmt.Sprintf("instance %s:%d healthy=%v on every node", ip, port, want), func() bool {
		for _, nd := range cl.Nodes {
			if !nd.Running() {
				continue
			}
			res, _, err := nd.Client().Instance(ctx, ns, group, "svc", ip, port, client.QueryOptions{Consistency: api.ConsistencyStale})
			if err != nil || res.Instance.Healthy != want {
				return false
			}
		}
		return true
	})
}

// The leader probes: an instance registered unhealthy becomes healthy while its
// listener is up, unhealthy within interval×fall+timeout+1s after it closes, healthy
// again when it reopens; every transition reaches every node.
func TestHealth_ProbesDriveTransitions(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[c.Followers()[0]].Client()
	probedService(ctx, t, cl)
	b := newBackend(t)
	unhealthy := false
	if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.port(), api.InstanceRequest{Healthy: &unhealthy}); err != nil {
		t.Fatal(err)
	}
	waitHealth(ctx, t, c, b.port(), true, 10*time.Second)

	b.Close()
	bound := probeInterval*probeFall + probeTimeout + time.Second
	took := waitHealth(ctx, t, c, b.port(), false, bound+2*time.Second)
	t.Logf("down detected everywhere after %v (bound %v)", took, bound)
	if took > bound {
		t.Fatalf("detection took %v, more than interval×fall+timeout+1s = %v", took, bound)
	}

	// The probe results are served by the leader through any node.
	res, err := cl.Health(ctx, ns, group, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Probing || len(res.Results) != 1 || res.Results[0].Outcome != "refused" || res.Results[0].Error != "connection refused" {
		t.Fatalf("health results: %+v", res)
	}

	b.Reopen()
	waitHealth(ctx, t, c, b.port(), true, 10*time.Second)
}

// A new leader keeps the committed health: an instance that is down stays unhealthy
// across the handover and is not flipped by it, and one that is up stays healthy.
func TestHealth_FailoverKeepsCommittedHealth(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[l].Client()
	probedService(ctx, t, cl)
	down, up := newBackend(t), newBackend(t)
	for _, b := range []*backend{down, up} {
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	down.Close()
	waitHealth(ctx, t, c, down.port(), false, 10*time.Second)

	// Check every health value each survivor shows until the new leader has probed both
	// instances more rounds than rise and fall: its prober starts from the committed
	// health with its counters at zero, so no round may flip either instance.
	c.Stop(l)
	nl := c.MustLeader()
	const rounds = probeFall + 1
	wait.For(t, 10*probeInterval, fmt.Sprintf("the new leader to probe both instances %d times", rounds), func() bool {
		for _, nd := range c.Nodes {
			if !nd.Running() {
				continue
			}
			res, _, err := nd.Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range res.Instances {
				if in.Port == down.port() && in.Healthy {
					t.Fatalf("%s: down instance flipped to healthy after failover", nd.ID)
				}
				if in.Port == up.port() && !in.Healthy {
					t.Fatalf("%s: up instance flipped to unhealthy after failover", nd.ID)
				}
			}
		}
		h, err := c.Nodes[nl].Client().Health(ctx, ns, group, "svc")
		if err != nil || !h.Probing {
			return false
		}
		probed := 0
		for _, r := range h.Results {
			if (r.Port == down.port() && r.ConsecutiveFailures >= rounds) || (r.Port == up.port() && r.ConsecutiveSuccesses >= rounds) {
				probed++
			}
		}
		return probed == 2
	})
	// The new leader's prober runs and still sees the same truth.
	res, err := c.Nodes[c.Leader()].Client().Health(ctx, ns, group, "svc")
	if err != nil || !res.Probing || len(res.Results) != 2 {
		t.Fatalf("new leader's results: %+v %v", res, err)
	}
}

// Deregistering an instance whose probe is in flight does not bring it back: the
// prober's late transition is fenced by the registration epoch.
func TestHealth_DeregisterDuringProbeStaysGone(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[l].Client()
	probedService(ctx, t, cl)
	// A listener that never answers keeps TCP connects succeeding, so use a closed port:
	// every probe fails after the timeout and produces a transition to unhealthy.
	b := newBackend(t)
	b.Close()
	var last uint64
	for round := 0; round < 3; round++ {
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
		// Let the prober get near its transition, then deregister.
		time.Sleep(probeInterval * time.Duration(probeFall) / 2)
		idx, err := cl.DeregisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.port())
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	if err := c.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(3 * probeInterval * probeFall)
	for time.Now().Before(end) {
		for _, nd := range c.Nodes {
			res, _, err := nd.Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Instances) != 0 {
				t.Fatalf("%s: deregistered instance came back: %+v", nd.ID, res.Instances)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countingBackend is a live listener on ip that counts the connections it accepts.
func countingBackend(t *testing.T, ip string) (port int, accepts *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepts = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			_ = c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepts
}

// The probe policy is enforced by the leader: a live listener in a denied range is
// never connected to and its instance turns unhealthy with outcome "denied"; the same
// listener under a policy that allows it turns healthy.
func TestHealth_ProbePolicyDeniesWithoutConnecting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deny    string
		healthy bool
	}{
		{"denied", "127.0.0.2/32", false},
		{"allowed", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy, err := healthcheck.ParsePolicy(healthcheck.LoopbackOnly, tc.deny)
			if err != nil {
				t.Fatal(err)
			}
			c := servertest.New(t, 3, servertest.FastTimeouts(), func(cfg *server.Config) { cfg.Health.Policy = policy })
			l := c.MustLeader()
			ctx := ctxT(t, 60*time.Second)
			cl := c.Nodes[l].Client()
			probedService(ctx, t, cl)
			port, accepts := countingBackend(t, "127.0.0.2")
			// Registered with the opposite health, so that only probes can bring it
			// to the expected one.
			initial := !tc.healthy
			if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.2", port, api.InstanceRequest{Healthy: &initial}); err != nil {
				t.Fatal(err)
			}
			if !tc.healthy {
				waitHealthAt(ctx, t, c, "127.0.0.2", port, false, 10*time.Second)
				res, err := cl.Health(ctx, ns, group, "svc")
				if err != nil {
					t.Fatal(err)
				}
				const want = "address 127.0.0.2 is outside the probe policy"
				if len(res.Results) != 1 || res.Results[0].Outcome != "denied" || res.Results[0].Error != want {
					t.Fatalf("health results %+v, want outcome denied, error %q", res.Results, want)
				}
				if n := accepts.Load(); n != 0 {
					t.Fatalf("the denied listener accepted %d connections", n)
				}
				var pol api.ProbePolicyResponse
				pol, err = c.Nodes[l].Client().ProbePolicy(ctx)
				if err != nil || strings.Join(pol.Deny, ",") != "127.0.0.2/32" || strings.Join(pol.Allow, ",") != "127.0.0.0/8,::1/128" {
					t.Fatalf("probe policy %+v %v", pol, err)
				}
				return
			}
			waitHealthAt(ctx, t, c, "127.0.0.2", port, true, 10*time.Second)
			if accepts.Load() == 0 {
				t.Fatal("healthy without a single accepted connection")
			}
		})
	}
}
