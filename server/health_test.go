package server_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
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

// backend is a real TCP listener an instance points at; Close/Reopen make it fail/pass
// probes.
type backend = testnet.Backend

// newBackend is a backend on a free loopback port.
func newBackend(t *testing.T) *backend { return testnet.At(t, servertest.FreePort(t)) }

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
// listener is up, unhealthy after it closes (the time it took is logged), healthy
// again when it reopens; every transition reaches every node.
func TestHealth_ProbesDriveTransitions(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[c.Followers()[0]].Client()
	probedService(ctx, t, cl)
	b := newBackend(t)
	unhealthy := false
	if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.Port(), api.InstanceRequest{Healthy: &unhealthy}); err != nil {
		t.Fatal(err)
	}
	waitHealth(ctx, t, c, b.Port(), true, 10*time.Second)

	b.Close()
	// The expected detection time is interval×fall+timeout; it is logged, not asserted (a
	// timing is a measurement: docs/benchmarks.md has the detection figures).
	expected := probeInterval*probeFall + probeTimeout
	took := waitHealth(ctx, t, c, b.Port(), false, 30*time.Second)
	t.Logf("down detected everywhere after %v (interval×fall+timeout = %v)", took, expected)

	// The probe results are served by the leader through any node.
	res, err := cl.Health(ctx, ns, group, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Probing || len(res.Results) != 1 || res.Results[0].Outcome != "refused" || res.Results[0].Error != "connection refused" {
		t.Fatalf("health results: %+v", res)
	}

	b.Reopen()
	waitHealth(ctx, t, c, b.Port(), true, 10*time.Second)
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
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.Port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	down.Close()
	waitHealth(ctx, t, c, down.Port(), false, 10*time.Second)

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
				if in.Port == down.Port() && in.Healthy {
					t.Fatalf("%s: down instance flipped to healthy after failover", nd.ID)
				}
				if in.Port == up.Port() && !in.Healthy {
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
			if (r.Port == down.Port() && r.ConsecutiveFailures >= rounds) || (r.Port == up.Port() && r.ConsecutiveSuccesses >= rounds) {
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

// A deregistration that races the prober is not undone by the prober's late health
// transition, and a registration made again meanwhile keeps the health of its own
// epoch. The prober runs on a manual clock and dials nothing (every probe is held until
// the test fails it), so both races are decided by the test, not by timing:
//
//   - "gone" is deregistered while its probe is in flight; the prober discards the
//     probe's result when it arrives.
//   - "again" is deregistered and registered again (a new epoch) after its probe has
//     decided a transition and while the prober is about to submit it; the SetHealth
//     command carrying the transition with the old epoch is committed after the
//     re-registration, and the epoch fence must keep it off the new registration.
//     "witness" fails in the same round, so its transition travels in the same
//     command and shows when that command has been applied.
func TestHealth_DeregisterDuringProbeStaysGone(t *testing.T) {
	clk, held := newManualClock(), newHeldDials()
	c := servertest.New(t, 3, servertest.FastTimeouts(), func(cfg *server.Config) {
		cfg.Health.Clock = clk
		cfg.Health.Dial = servertest.GuardDial(t, held.dial)
	})
	l := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[l].Client()
	// A timeout far longer than the test needs to hold a probe. The leader's probes decide
	// alone (confirm: leader): this test drives the leader's batch against a
	// re-registration, and every node's dials are held.
	const interval = 10 * time.Second
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: interval.String(), Timeout: (interval - time.Second).String(), Rise: 1, Fall: 1, Confirm: "leader",
	}}); err != nil {
		t.Fatal(err)
	}
	const gone, again, witness = 20001, 20002, 20003
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	healthy := true
	for _, port := range []int{gone, again, witness} {
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", port, api.InstanceRequest{Healthy: &healthy}); err != nil {
			t.Fatal(err)
		}
	}
	results := func() map[int]api.ProbeResult {
		h, err := cl.Health(ctx, ns, group, "svc")
		if err != nil {
			t.Fatal(err)
		}
		if !h.Probing {
			return nil
		}
		out := make(map[int]api.ProbeResult, len(h.Results))
		for _, r := range h.Results {
			out[r.Port] = r
		}
		return out
	}
	var oldEpoch uint64
	wait.For(t, 10*time.Second, "the prober to know the three instances", func() bool {
		rs := results()
		oldEpoch = rs[again].Epoch
		return len(rs) == 3
	})

	// One round: the three probes start and are held.
	clk.Advance(interval)
	wait.For(t, 10*time.Second, "the three probes in flight", func() bool { return held.holding(addr(gone), addr(again), addr(witness)) })

	// gone: deregistered with its probe in flight, which then fails.
	if _, err := cl.DeregisterInstance(ctx, ns, group, "svc", "127.0.0.1", gone); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the prober to drop the deregistered instance", func() bool {
		_, known := results()[gone]
		return !known
	})
	held.release(t, addr(gone))
	discarded := func() float64 { return metricValue(ctx, t, c.Nodes[l], "roster_health_results_discarded_total") }
	wait.For(t, 10*time.Second, "the late result to be discarded", func() bool { return discarded() == 1 })

	// again and witness: their probes fail and decide transitions to unhealthy, queued
	// until the batch window closes on the manual clock.
	held.release(t, addr(again))
	held.release(t, addr(witness))
	wait.For(t, 10*time.Second, "both transitions decided", func() bool {
		rs := results()
		return rs[again].Pending && rs[again].Outcome == "refused" && rs[witness].Pending && rs[witness].Outcome == "refused"
	})

	// Close the batch window with the scheduler held at its next step: it has the
	// transitions to submit and has not seen the changes below.
	stall := clk.StallNext()
	t.Cleanup(stall.Release)
	clk.Advance(healthcheck.DefaultFlushInterval)
	select {
	case <-stall.Reached():
	case <-ctx.Done():
		t.Fatal("the prober's scheduler never asked the clock for the time")
	}
	if _, err := cl.DeregisterInstance(ctx, ns, group, "svc", "127.0.0.1", again); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", again, api.InstanceRequest{Healthy: &healthy}); err != nil {
		t.Fatal(err)
	}
	res, _, err := cl.Instance(ctx, ns, group, "svc", "127.0.0.1", again, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	registered := res.Instance
	if registered.CreateIndex == oldEpoch {
		t.Fatalf("registered again with the same epoch %d", oldEpoch)
	}
	stall.Release()

	// The batch is applied everywhere once witness is unhealthy everywhere, and it was
	// committed after the re-registration.
	waitHealth(ctx, t, c, witness, false, 10*time.Second)
	w, _, err := cl.Instance(ctx, ns, group, "svc", "127.0.0.1", witness, client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Instance.ModifyIndex <= registered.CreateIndex {
		t.Fatalf("the batch was committed at %d, before the re-registration at %d: the race was not run", w.Instance.ModifyIndex, registered.CreateIndex)
	}
	for _, nd := range c.Nodes {
		list, _, err := nd.Client().Instances(ctx, ns, group, "svc", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, in := range list.Instances {
			switch in.Port {
			case gone:
				t.Fatalf("%s: the deregistered instance came back: %+v", nd.ID, in)
			case again:
				found = true
				if in.CreateIndex != registered.CreateIndex || in.ModifyIndex != registered.ModifyIndex || !in.Healthy {
					t.Fatalf("%s: the instance registered again is %+v, want it as registered (epoch %d, modified at %d, healthy): the old epoch's transition reached it",
						nd.ID, in, registered.CreateIndex, registered.ModifyIndex)
				}
			}
		}
		if !found {
			t.Fatalf("%s: the instance registered again is missing", nd.ID)
		}
	}

	// The prober follows the new epoch from its committed health, without the old
	// epoch's probe, and counts only witness's transition as committed.
	var r api.ProbeResult
	wait.For(t, 10*time.Second, "the prober to follow the new epoch", func() bool {
		r = results()[again]
		return r.Epoch == registered.CreateIndex
	})
	if !r.Healthy || r.Pending || r.ConsecutiveFailures != 0 || r.Outcome != "" {
		t.Fatalf("the new epoch's probe state %+v, want healthy, nothing pending, not probed yet", r)
	}
	if _, known := results()[gone]; known {
		t.Fatal("the prober knows the deregistered instance again")
	}
	if n := metricValue(ctx, t, c.Nodes[l], `roster_health_transitions_committed_total{to="unhealthy"}`); n != 1 {
		t.Fatalf("%v transitions to unhealthy counted as committed, want 1 (witness)", n)
	}
	if n := discarded(); n != 1 {
		t.Fatalf("%v results discarded, want 1 (gone)", n)
	}
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
			be := testnet.New(t, "127.0.0.2")
			port := be.Port()
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
				if n := be.Accepts(); n != 0 {
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
			if be.Accepts() == 0 {
				t.Fatal("healthy without a single accepted connection")
			}
		})
	}
}
