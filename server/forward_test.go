package server_test

import (
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
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
