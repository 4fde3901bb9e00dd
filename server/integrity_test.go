package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/store"
)

// stateCheckEvery makes the leader ask for state checks at this interval.
func stateCheckEvery(d time.Duration) servertest.Option {
	return func(c *server.Config) { c.StateCheckInterval = d }
}

// tamper changes an instance's address and health in a state file directly, as a disk
// that flipped bytes or a hand that edited it would: nothing goes through the log.
func tamper(t *testing.T, st *store.Store, ref model.InstanceRef) {
	t.Helper()
	_, in, err := st.Instance(nil, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *store.Txn) error {
		// The index as of this transaction: entries keep being applied meanwhile.
		idx := tx.AppliedIndex()
		if err := tx.DeregisterInstance(idx, ref); err != nil {
			return err
		}
		in.IP, in.Healthy = "127.66.66.66", !in.Healthy
		if err := tx.RegisterInstance(idx, in); err != nil {
			return err
		}
		return tx.SetAppliedIndex(idx)
	}); err != nil {
		t.Fatal(err)
	}
}

// notReadyFor waits until node i reports itself not ready with a state_mismatch.
func notReadyFor(t *testing.T, c *servertest.Cluster, i int) {
	t.Helper()
	wait.For(t, 20*time.Second, c.Nodes[i].ID+" to raise the state alarm", func() bool {
		ok, rd := c.Nodes[i].Server.Node().Ready()
		return !ok && strings.Contains(rd.Reason, "state_mismatch")
	})
}

// staleRead reads the service from node i's own state.
func staleRead(ctx context.Context, c *servertest.Cluster, i int) error {
	_, _, err := c.Nodes[i].Client().Instances(ctx, "", "", "orders", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
	return err
}

// A state file edited while its node was stopped is caught at the next start: the node
// reports state_mismatch, serves no reads, and roster_state_corrupt is 1; its peers are
// unaffected.
func TestIntegrity_StateChangedWhileStopped(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts())
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	nc := c.Nodes[leader].Client()
	idx, err := nc.RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	victim := c.Followers()[0]
	c.Stop(victim)
	st, err := store.Open(raftnode.StatePath(c.Nodes[victim].DataDir), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, st, model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	c.Start(victim)
	notReadyFor(t, c, victim)
	var ae *client.APIError
	if err := staleRead(ctx, c, victim); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeStateMismatch {
		t.Fatalf("a read on the node with the changed state: %v, want 503 %s", err, api.CodeStateMismatch)
	}
	if got := metricValue(ctx, t, c.Nodes[victim], "roster_state_corrupt"); got != 1 {
		t.Fatalf("roster_state_corrupt = %v on the node with the changed state", got)
	}
	for i := range c.Nodes {
		if i == victim {
			continue
		}
		if err := staleRead(ctx, c, i); err != nil {
			t.Fatalf("a read on %s: %v", c.Nodes[i].ID, err)
		}
	}

	// A clean restart of an untouched node raises nothing.
	other := c.Followers()[0]
	if other == victim {
		other = c.Followers()[1]
	}
	c.Stop(other)
	c.Start(other)
	wait.For(t, 20*time.Second, "the untouched node to be ready after its restart", func() bool {
		ok, _ := c.Nodes[other].Server.Node().Ready()
		return ok
	})
}

// A node whose state silently diverges while it runs is caught by the next state
// check: the two others agree with each other and not with it, so it alone raises the
// alarm.
func TestIntegrity_DivergedNodeFoundByTheStateCheck(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), stateCheckEvery(300*time.Millisecond))
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	idx, err := c.Nodes[leader].Client().RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	victim := c.Followers()[0]
	tamper(t, c.Nodes[victim].Server.Store(), model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080})
	notReadyFor(t, c, victim)
	for i := range c.Nodes {
		if i == victim {
			continue
		}
		if ok, rd := c.Nodes[i].Server.Node().Ready(); !ok && strings.Contains(rd.Reason, "state_mismatch") {
			t.Fatalf("%s raised the alarm too: %+v", c.Nodes[i].ID, rd)
		}
	}
	if err := staleRead(ctx, c, victim); err == nil {
		t.Fatal("the diverged node still serves reads")
	}
}

// A leader whose state diverges raises the alarm and hands over leadership.
func TestIntegrity_DivergedLeaderStepsDown(t *testing.T) {
	c := servertest.New(t, 3, servertest.FastTimeouts(), stateCheckEvery(300*time.Millisecond))
	leader := c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	idx, err := c.Nodes[leader].Client().RegisterInstance(ctx, "", "", "orders", "127.100.0.1", 8080, api.InstanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	tamper(t, c.Nodes[leader].Server.Store(), model.InstanceRef{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders", IP: "127.100.0.1", Port: 8080})
	wait.For(t, 30*time.Second, "the diverged leader to raise the alarm and hand over leadership", func() bool {
		ok, rd := c.Nodes[leader].Server.Node().Ready()
		return !ok && strings.Contains(rd.Reason, "state_mismatch") && !c.Nodes[leader].Server.Node().IsLeader()
	})
}
