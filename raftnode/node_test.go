package raftnode

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A cluster bootstrapped from static peers elects exactly one leader, and every node
// knows it and reaches the ready state.
func TestCluster_StaticPeersElectOneLeader(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	leaders := 0
	for _, tn := range c.nodes {
		if tn.N().IsLeader() {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d nodes report IsLeader, want 1", leaders)
	}
	for _, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" ready", func() bool {
			ok, _ := tn.N().Ready()
			return ok
		})
		m, ok := tn.N().Leader()
		if !ok || m.ID != leader.id || m.RaftAddr != leader.raftAddr {
			t.Fatalf("%s: Leader() = %+v, %v; want %s at %s", tn.id, m, ok, leader.id, leader.raftAddr)
		}
		if !tn.N().KnownLeader() {
			t.Fatalf("%s: KnownLeader() = false", tn.id)
		}
	}
	if lc := leader.N().LastContact(); lc != 0 {
		t.Fatalf("leader LastContact = %s, want 0", lc)
	}
	for _, tn := range c.followers(leader) {
		if lc := tn.N().LastContact(); lc < 0 || lc > 5*time.Second {
			t.Fatalf("%s: LastContact = %s", tn.id, lc)
		}
	}
}

// An entry applied on the leader reaches every node's state machine, and Apply returns
// the entry's index.
func TestNode_ApplyReplicatesToAllNodes(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	var last uint64
	for i := range 5 {
		idx := mustApplyNamespace(t, leader.N(), fmt.Sprintf("ns-%d", i))
		if idx <= last {
			t.Fatalf("index %d after %d: indexes must increase", idx, last)
		}
		last = idx
	}
	if got := leader.sm.AppliedIndex(); got < last {
		t.Fatalf("leader applied %d < returned index %d: Apply returned before applying", got, last)
	}
	for _, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" applies the entries", func() bool {
			return tn.sm.AppliedIndex() >= last && hasNamespace(tn, "ns-4")
		})
		_, ns, err := tn.st.Namespace(nil, "ns-2")
		if err != nil || ns.CreateIndex == 0 {
			t.Fatalf("%s: ns-2 = %+v, %v", tn.id, ns, err)
		}
	}
}

// The state machine's domain error comes back from Apply with its sentinel intact and
// the entry's index.
func TestNode_ApplyReturnsDomainError(t *testing.T) {
	c := mustNewCluster(t, 1)
	leader := c.waitForLeader(10 * time.Second)
	idx, err := leader.N().Apply(ctxTimeout(t, 5*time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "not valid!"}})
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("err = %v, want model.ErrInvalid", err)
	}
	if idx == 0 {
		t.Fatalf("index = 0, want the entry's index")
	}
}

// Apply on a follower is refused with ErrNotLeader and writes nothing.
func TestNode_ApplyOnFollowerIsNotLeader(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	for _, tn := range c.followers(leader) {
		_, err := tn.N().Apply(ctxTimeout(t, 5*time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "from-" + tn.id}})
		if !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) {
			t.Fatalf("%s: err = %v, want ErrNotLeader (leader known)", tn.id, err)
		}
	}
	// A later write through the leader lands; the refused ones never do.
	idx := mustApplyNamespace(t, leader.N(), "marker")
	for _, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" applies the marker", func() bool { return tn.sm.AppliedIndex() >= idx })
		for _, f := range c.nodes {
			if hasNamespace(tn, "from-"+f.id) {
				t.Fatalf("%s holds a namespace written through follower %s", tn.id, f.id)
			}
		}
	}
}

// A node without a quorum knows no leader: Apply says ErrNoLeader and Ready is false
// with a reason.
func TestNode_NoQuorumNoLeader(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.start(c.nodes[0], "")
	n := c.nodes[0].N()
	_, err := n.Apply(ctxTimeout(t, time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "x"}})
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrNoLeader) {
		t.Fatalf("err = %v, want ErrNotLeader and ErrNoLeader", err)
	}
	if ok, rep := n.Ready(); ok || rep.Reason == "" || rep.Leader != "" {
		t.Fatalf("Ready() = %v, %+v; want not ready with a reason", ok, rep)
	}
	if n.KnownLeader() || n.LastContact() != -1 {
		t.Fatalf("KnownLeader %v, LastContact %s; want false, -1", n.KnownLeader(), n.LastContact())
	}
}

// When the leader shuts down, the others elect a new leader that accepts writes within
// a few seconds.
func TestCluster_LeaderFailover(t *testing.T) {
	c := mustNewCluster(t, 3)
	old := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, old.N(), "before")

	start := time.Now()
	c.stop(old)
	var idx uint64
	wait.For(t, 10*time.Second, "a write on a new leader", func() bool {
		for _, tn := range c.running() {
			i, err := tn.N().Apply(ctxTimeout(t, time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "after"}})
			if err == nil {
				idx = i
				return true
			}
		}
		return false
	})
	took := time.Since(start)
	t.Logf("failover to first committed write took %s", took)
	if took > 5*time.Second {
		t.Fatalf("failover took %s, want < 5s with the default timings", took)
	}
	for _, tn := range c.running() {
		wait.For(t, 5*time.Second, tn.id+" applies the post-failover write", func() bool {
			return tn.sm.AppliedIndex() >= idx && hasNamespace(tn, "before") && hasNamespace(tn, "after")
		})
	}
}

// Restarting every node on the same directories keeps the state, restores no
// snapshot over the durable state (replayed entries are skipped by the FSM), and the
// cluster accepts writes again.
func TestCluster_RestartKeepsState(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	for i := range 10 {
		mustApplyNamespace(t, leader.N(), fmt.Sprintf("a-%d", i))
	}
	// A snapshot in the middle: a restore of it at start would roll the state back
	// and raise the store's index floor.
	for _, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" catches up", func() bool { return hasNamespace(tn, "a-9") })
		if err := tn.N().Raft().Snapshot().Error(); err != nil {
			t.Fatalf("%s: snapshot: %v", tn.id, err)
		}
	}
	var last uint64
	for i := range 10 {
		last = mustApplyNamespace(t, leader.N(), fmt.Sprintf("b-%d", i))
	}
	before := make([]store.State, len(c.nodes))
	for i, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" catches up", func() bool { return tn.sm.AppliedIndex() >= last })
		wait.For(t, 5*time.Second, tn.id+" member table complete", func() bool {
			_, ms, err := tn.st.Members(nil)
			return err == nil && len(ms) == 3
		})
		st, err := tn.st.Dump()
		if err != nil {
			t.Fatalf("%s: dump: %v", tn.id, err)
		}
		before[i] = st
	}
	for _, tn := range c.nodes {
		c.stop(tn)
	}
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader = c.waitForLeader(10 * time.Second)
	next := mustApplyNamespace(t, leader.N(), "after-restart")
	if next <= last {
		t.Fatalf("index after restart %d <= %d", next, last)
	}
	var replayed int64
	for i, tn := range c.nodes {
		wait.For(t, 5*time.Second, tn.id+" applies the new write", func() bool { return tn.sm.AppliedIndex() >= next })
		if n := tn.sm.restores.Load(); n != 0 {
			t.Fatalf("%s: %d snapshot restores at start, want 0", tn.id, n)
		}
		if f := tn.st.IndexFloor(); f != 0 {
			t.Fatalf("%s: index floor %d, want 0 (no restore)", tn.id, f)
		}
		replayed += tn.sm.replayed.Load()
		after, err := tn.st.Dump()
		if err != nil {
			t.Fatalf("%s: dump: %v", tn.id, err)
		}
		for _, ns := range before[i].Namespaces {
			_, got, err := tn.st.Namespace(nil, ns.ID)
			if err != nil || !reflect.DeepEqual(got, ns) {
				t.Fatalf("%s: namespace %s = %+v, %v; before restart %+v", tn.id, ns.ID, got, err, ns)
			}
		}
		if len(after.Namespaces) != len(before[i].Namespaces)+1 {
			t.Fatalf("%s: %d namespaces after restart, want %d", tn.id, len(after.Namespaces), len(before[i].Namespaces)+1)
		}
	}
	if replayed == 0 {
		t.Fatalf("no entry was replayed at restart; the test did not exercise replay")
	}
}

// Shutdown is idempotent, and a shut-down node refuses work with ErrShutdown.
func TestNode_ShutdownIdempotent(t *testing.T) {
	c := mustNewCluster(t, 1)
	tn := c.waitForLeader(10 * time.Second)
	n := tn.N()
	if err := n.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if _, err := n.Apply(ctxTimeout(t, time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "x"}}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Apply after shutdown: %v, want ErrShutdown", err)
	}
	if err := n.ConsistentRead(ctxTimeout(t, time.Second)); !errors.Is(err, ErrShutdown) {
		t.Fatalf("ConsistentRead after shutdown: %v, want ErrShutdown", err)
	}
	if ok, _ := n.Ready(); ok {
		t.Fatalf("Ready after shutdown")
	}
	tn.running = false
	if err := tn.st.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
}
