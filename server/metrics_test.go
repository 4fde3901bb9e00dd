package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server/servertest"
)

// The instance gauges move on every node (a follower's /metrics here) as instances are
// registered, change health and are deregistered; the leader's probe histogram counts
// its probes.
func TestMetrics_InstanceGaugesAndProbeHistogram(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[l].Client()
	probedService(ctx, t, cl)
	f := c.Nodes[c.Followers()[0]]
	series := func(health string) string {
		return fmt.Sprintf(`roster_instances{group=%q,health=%q,namespace=%q,service="svc"}`, group, health, ns)
	}
	gauges := func(healthy, unhealthy float64) func() bool {
		return func() bool {
			return metricValue(ctx, t, f, series("healthy")) == healthy && metricValue(ctx, t, f, series("unhealthy")) == unhealthy
		}
	}
	const probes = `roster_health_probe_duration_seconds_count{type="TCP"}`
	before := metricValue(ctx, t, c.Nodes[l], probes)

	a, b := newBackend(t), newBackend(t)
	for _, be := range []*backend{a, b} {
		if _, err := cl.RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", be.Port(), api.InstanceRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 10*time.Second, "2 healthy, 0 unhealthy on a follower", gauges(2, 0))
	a.Close()
	wait.For(t, 30*time.Second, "1 healthy, 1 unhealthy on a follower", gauges(1, 1))
	if _, err := cl.DeregisterInstance(ctx, ns, group, "svc", "127.0.0.1", b.Port()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "0 healthy, 1 unhealthy on a follower", gauges(0, 1))
	wait.For(t, 10*time.Second, "the leader's probe histogram counts", func() bool {
		return metricValue(ctx, t, c.Nodes[l], probes) >= before+3
	})
}
