package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
)

// noneCluster makes the service's DEFAULT cluster unprobed.
func noneCluster(ctx context.Context, t *testing.T, c *client.Client, svc string) {
	t.Helper()
	if _, err := c.UpsertCluster(ctx, "", "", svc, "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
}

func recvInstances(t *testing.T, ch <-chan client.InstancesEvent, what string, ok func(client.InstancesEvent) bool) client.InstancesEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatalf("%s: watch ended", what)
			}
			if ev.Err != nil {
				t.Fatalf("%s: %v", what, ev.Err)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no such event within 20s", what)
		}
	}
}

func hasPort(ev client.InstancesEvent, port int) bool {
	for _, in := range ev.Instances.Instances {
		if in.Port == port {
			return true
		}
	}
	return false
}

// TestWatch_FollowerStreamSurvivesLeaderFailover: a stream on a follower keeps
// delivering, on the same connection, while the leader is stopped and another is
// elected, and it is resent the full view when it sees the new leader.
func TestWatch_FollowerStreamSurvivesLeaderFailover(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	leader := c.MustLeader()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lc := c.Nodes[leader].Client()
	noneCluster(ctx, t, lc, "orders")
	if _, err := lc.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 1000, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	follower := c.Followers()[0]
	errs := make(chan error, 16)
	ch, err := c.Nodes[follower].Client().WatchInstances(ctx, "", "", "orders", client.WatchOptions{
		OnError: func(err error) { errs <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	recvInstances(t, ch, "first state", func(ev client.InstancesEvent) bool { return hasPort(ev, 1000) })

	c.Stop(leader)
	next := c.MustLeader()
	idx, err := c.Nodes[next].Client().RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 1001, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev := recvInstances(t, ch, "the write through the new leader", func(ev client.InstancesEvent) bool { return hasPort(ev, 1001) })
	if ev.Index < idx || ev.Node != c.Nodes[follower].Client().Addr() {
		t.Fatalf("event index %d from %s, want ≥ %d from the follower", ev.Index, ev.Node, idx)
	}
	select {
	case err := <-errs:
		t.Fatalf("the stream was dropped during the failover: %v", err)
	default:
	}
	// The follower saw the leader change and resent its watchers their views.
	resp, err := http.Get("http://" + c.Nodes[follower].HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `roster_watch_resyncs_total{reason="leadership"}`) {
		t.Fatalf("no leadership resync counted on the follower:\n%s", grepLines(string(body), "roster_watch"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWatch_ClientResumesOnAnotherNode: the Go client's watch outlives the node it is
// connected to and sees the change made while it reconnected.
func TestWatch_ClientResumesOnAnotherNode(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	leader := c.MustLeader()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lc := c.Nodes[leader].Client()
	noneCluster(ctx, t, lc, "orders")
	if _, err := lc.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 1000, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	fs := c.Followers()
	watched, other := fs[0], fs[1]
	ch, err := c.Nodes[watched].Client().WatchInstances(ctx, "", "", "orders", client.WatchOptions{
		Fallback: []string{c.Nodes[other].HTTPAddr}, MinBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	recvInstances(t, ch, "first state", func(ev client.InstancesEvent) bool { return hasPort(ev, 1000) })
	c.Stop(watched)
	if _, err := lc.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 1001, api.InstanceRequest{}); err != nil {
		t.Fatal(err)
	}
	ev := recvInstances(t, ch, "the change made while the node was down", func(ev client.InstancesEvent) bool { return hasPort(ev, 1001) })
	if ev.Node != c.Nodes[other].Client().Addr() {
		t.Fatalf("event served by %s, want the fallback %s", ev.Node, c.Nodes[other].Client().Addr())
	}
}
