package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server/servertest"
)

// A node whose state file is lost or torn (moved aside at open, so it starts empty)
// rebuilds everything from its Raft snapshot and log at start: the entries the
// snapshot covers are not replayed from the log, so the snapshot must be restored
// first. Without that, the instances registered before the snapshot would be missing.
func TestDurability_StateRebuiltFromSnapshotAndLog(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	l := c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	cl := c.Nodes[l].Client()
	for p := 1; p <= 30; p++ {
		register(ctx, t, cl, "kept", "127.101.0.1", p)
	}
	victim := c.Followers()[0]
	if err := c.WaitApplied(ctx, c.Nodes[l].Server.Node().FSM().AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[victim].Server.Node().Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var last uint64
	for p := 31; p <= 40; p++ {
		last = register(ctx, t, cl, "kept", "127.101.0.1", p)
	}
	if err := c.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	c.Stop(victim)
	// The state file is gone, as after a crash that tore it.
	state := filepath.Join(c.Nodes[victim].DataDir, "state.db")
	for _, p := range []string{state, state + ".clean"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	c.Start(victim)
	if err := c.Nodes[victim].Server.Node().FSM().WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	res, _, err := c.Nodes[victim].Client().Instances(ctx, ns, group, "kept", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
	if err != nil {
		t.Fatal(err)
	}
	if got := addrs(res.Instances); len(got) != 40 {
		t.Fatalf("rebuilt node has %d instances, want 40", len(got))
	}
}
