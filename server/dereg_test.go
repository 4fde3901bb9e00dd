package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// instanceGone reports whether no running node of the cluster has the instance (stale
// reads, so each node answers from its own applied state).
func instanceGone(ctx context.Context, cl *servertest.Cluster, port int) bool {
	for _, nd := range cl.Nodes {
		if !nd.Running() {
			continue
		}
		_, _, err := nd.Client().Instance(ctx, ns, group, "svc", "127.0.0.1", port, client.QueryOptions{Consistency: api.ConsistencyStale})
		if !client.IsNotFound(err) {
			return false
		}
	}
	return true
}

// An instance whose listener closed is deregistered about deregisterAfter after the
// committed time it became unhealthy, although leadership moved half-way: the new
// leader's prober shows the same deadline to the millisecond (had it restarted the timer,
// it would show one half a period later, and the instance would stay that much longer);
// a watch sees it disappear, a healthy instance stays, and the deregistration is
// counted once.
func TestHealth_AutoDeregistrationSurvivesLeadershipTransfer(t *testing.T) {
	const after = 6 * time.Second
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 90*time.Second)
	cl := c.Nodes[l].Client()
	if _, err := cl.UpsertCluster(ctx, ns, group, "svc", "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
		Type: "TCP", Interval: probeInterval.String(), Timeout: probeTimeout.String(), Rise: 1, Fall: probeFall,
		DeregisterAfter: after.String(),
	}}); err != nil {
		t.Fatal(err)
	}
	down, up := newBackend(t), newBackend(t)
	for _, b := range []*backend{down, up} {
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.Port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// A watch on a follower, from the start.
	f := c.Nodes[c.Followers()[0]]
	events, err := f.Client().WatchInstances(ctx, ns, group, "svc", client.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sawDown, sawGone := make(chan struct{}), make(chan struct{})
	go func() {
		var downSeen bool
		for ev := range events {
			present := false
			for _, in := range ev.Instances.Instances {
				if in.Port == down.Port() {
					present = true
					if !in.Healthy && !downSeen {
						downSeen = true
						close(sawDown)
					}
				}
			}
			if downSeen && !present {
				close(sawGone)
				return
			}
		}
	}()

	down.Close()
	waitHealth(ctx, t, c, down.Port(), false, 30*time.Second)
	res, _, err := c.Nodes[l].Client().Instance(ctx, ns, group, "svc", "127.0.0.1", down.Port(), client.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Instance.UnhealthySince == nil {
		t.Fatalf("unhealthy instance without unhealthySince: %+v", res.Instance)
	}
	since := *res.Instance.UnhealthySince
	deadline := since.Add(after)
	t.Logf("unhealthy since %s, deadline %s", since.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano))
	// Every node applied the same time.
	for _, nd := range c.Nodes {
		r, _, err := nd.Client().Instance(ctx, ns, group, "svc", "127.0.0.1", down.Port(), client.QueryOptions{Consistency: api.ConsistencyStale})
		if err != nil || r.Instance.UnhealthySince == nil || !r.Instance.UnhealthySince.Equal(since) {
			t.Fatalf("%s: unhealthySince %v (%v), want %s", nd.ID, r.Instance.UnhealthySince, err, since)
		}
	}

	// The leader's prober shows the deadline.
	deregisterAt := func(nd *servertest.Node) (time.Time, bool) {
		h, err := nd.Client().Health(ctx, ns, group, "svc")
		if err != nil || !h.Probing {
			return time.Time{}, false
		}
		for _, r := range h.Results {
			if r.Port == down.Port() {
				return r.DeregisterAt, !r.DeregisterAt.IsZero()
			}
		}
		return time.Time{}, false
	}
	wait.For(t, 5*time.Second, "the leader's prober to show the deadline", func() bool {
		at, ok := deregisterAt(c.Nodes[l])
		if ok && !at.Equal(deadline) {
			t.Fatalf("the leader's deregisterAt %s, want %s", at, deadline)
		}
		return ok
	})

	// Leadership moves half-way: a restarted timer would deregister at 1.5×after, a
	// kept one at 1×after.
	wait.For(t, after, "half of deregisterAfter", func() bool { return time.Since(since) >= after/2 })
	if err := cl.TransferLeadership(ctx, ""); err != nil {
		t.Fatal(err)
	}
	newLeader := -1
	wait.For(t, 10*time.Second, "a new leader", func() bool { newLeader = c.Leader(); return newLeader >= 0 && newLeader != l })
	t.Logf("leadership moved %s after unhealthySince", time.Since(since).Round(time.Millisecond))
	var at time.Time
	wait.For(t, after, "the new leader's prober to show the deadline", func() bool {
		var ok bool
		at, ok = deregisterAt(c.Nodes[newLeader])
		return ok || instanceGone(ctx, c, down.Port())
	})
	if !at.IsZero() && !at.Equal(deadline) {
		t.Fatalf("the new leader's deregisterAt is %s, want the committed deadline %s", at, deadline)
	}

	wait.For(t, 3*after, "the instance deregistered on every node", func() bool { return instanceGone(ctx, c, down.Port()) })
	gone := time.Now()
	t.Logf("gone everywhere %s after unhealthySince (deregisterAfter %s)", gone.Sub(since).Round(time.Millisecond), after)
	if gone.Before(deadline) {
		t.Fatalf("deregistered %s before the deadline", deadline.Sub(gone))
	}
	if limit := deadline.Add(after / 2); gone.After(limit) {
		t.Fatalf("deregistered %s after the deadline: the new leader did not keep the committed time", gone.Sub(deadline))
	}
	select {
	case <-sawGone:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not see the instance disappear")
	}
	select {
	case <-sawDown:
	default:
		t.Fatal("the watch never saw the instance unhealthy")
	}
	if _, _, err := cl.Instance(ctx, ns, group, "svc", "127.0.0.1", up.Port(), client.QueryOptions{}); err != nil {
		t.Fatalf("the healthy instance: %v", err)
	}
	total := 0.0
	for _, nd := range c.Nodes {
		total += metricValue(ctx, t, nd, "roster_health_auto_deregistrations_total")
	}
	if total != 1 {
		t.Fatalf("roster_health_auto_deregistrations_total sums to %v over the nodes, want 1", total)
	}
	if got := metricValue(ctx, t, c.Nodes[newLeader], "roster_health_auto_deregistrations_total"); got != 1 {
		t.Fatalf("the new leader counted %v deregistrations, want 1", got)
	}
}
