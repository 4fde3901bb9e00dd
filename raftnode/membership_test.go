package raftnode

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// membersByID indexes a Members result.
func membersByID(ms []Member) map[string]Member {
	out := make(map[string]Member, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out
}

// Followers of a statically bootstrapped cluster announce their HTTP addresses to the
// leader, so every node's member table and Members() show all three.
func TestCluster_FollowersRegisterTheirAddresses(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, tn.id+" learns every member's HTTP address", func() bool {
			for _, other := range c.nodes {
				rec, ok := tn.st.Member(other.id)
				if !ok || rec.HTTPAddr != other.httpAddr || rec.RaftAddr != other.raftAddr {
					return false
				}
			}
			return true
		})
	}
	for _, tn := range c.followers(leader) {
		m, ok := tn.N().Leader()
		if !ok || m.HTTPAddr != leader.httpAddr {
			t.Fatalf("%s: Leader() = %+v, %v; want HTTP address %s", tn.id, m, ok, leader.httpAddr)
		}
	}
	ms, err := c.followers(leader)[0].N().Members(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("members: %v", err)
	}
	if len(ms) != 3 {
		t.Fatalf("members = %+v, want 3", ms)
	}
	for _, m := range ms {
		tn := c.nodes[map[string]int{"n1": 0, "n2": 1, "n3": 2}[m.ID]]
		if m.RaftAddr != tn.raftAddr || m.HTTPAddr != tn.httpAddr || !m.Voter || m.Leader != (tn == leader) {
			t.Fatalf("member %+v; want raft %s http %s voter leader=%v", m, tn.raftAddr, tn.httpAddr, tn == leader)
		}
		if m.Leader && m.LastContact != 0 {
			t.Fatalf("leader entry LastContact = %s, want 0", m.LastContact)
		}
	}
}

// A fresh node started with Join asks the cluster to add it; it becomes a voter with
// its addresses recorded, and receives the replicated state.
func TestNode_JoinAddsVoter(t *testing.T) {
	c := newTestCluster(t, 2, false)
	first, second := c.nodes[0], c.nodes[1]
	c.peers = []Peer{{ID: first.id, Addr: first.raftAddr}}
	c.start(first, "")
	c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, first.N(), "before-join")

	c.start(second, first.httpAddr)
	wait.For(t, 10*time.Second, "the joined node in the configuration with its addresses", func() bool {
		ms, err := first.N().Members(ctxTimeout(t, time.Second))
		if err != nil {
			return false
		}
		m, ok := membersByID(ms)[second.id]
		return ok && m.Voter && m.RaftAddr == second.raftAddr && m.HTTPAddr == second.httpAddr
	})
	wait.For(t, 10*time.Second, "the joined node to receive the state", func() bool {
		return hasNamespace(second, "before-join")
	})
	idx := mustApplyNamespace(t, first.N(), "after-join")
	wait.For(t, 5*time.Second, "the joined node to apply a new write", func() bool {
		return second.sm.AppliedIndex() >= idx && hasNamespace(second, "after-join")
	})
}

// Join on the leader is idempotent for the same id and address, re-adds a server that
// moved, and rejects invalid requests; on a follower it is ErrNotLeader.
func TestNode_JoinRules(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(leader)[0]

	before := leader.N().Raft().GetConfiguration()
	if err := before.Error(); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	same := JoinRequest{ID: f.id, RaftAddr: f.raftAddr, HTTPAddr: f.httpAddr}
	if err := leader.N().Join(ctx, same); err != nil {
		t.Fatalf("re-join with the same addresses: %v", err)
	}
	after := leader.N().Raft().GetConfiguration()
	if err := after.Error(); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	if after.Index() != before.Index() {
		t.Fatalf("re-join with the same address changed the configuration (index %d -> %d)", before.Index(), after.Index())
	}

	if err := c.followers(leader)[1].N().Join(ctx, same); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("join on a follower: %v, want ErrNotLeader", err)
	}
	if err := leader.N().Join(ctx, JoinRequest{ID: "", RaftAddr: "127.0.0.1:1"}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("join without id: %v, want model.ErrInvalid", err)
	}
	if err := leader.N().Join(ctx, JoinRequest{ID: "x", RaftAddr: "nope"}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("join with a bad address: %v, want model.ErrInvalid", err)
	}

	// A non-voter joins, then the same server moves to a new address.
	extra := freeAddrs(t, 2)
	if err := leader.N().Join(ctx, JoinRequest{ID: "n9", RaftAddr: extra[0], HTTPAddr: "127.0.0.1:9", NonVoter: true}); err != nil {
		t.Fatalf("join non-voter: %v", err)
	}
	if err := leader.N().Join(ctx, JoinRequest{ID: "n9", RaftAddr: extra[1], HTTPAddr: "127.0.0.1:9", NonVoter: true}); err != nil {
		t.Fatalf("re-join at a new address: %v", err)
	}
	ms, err := leader.N().Members(ctx)
	if err != nil {
		t.Fatalf("members: %v", err)
	}
	m, ok := membersByID(ms)["n9"]
	if !ok || m.Voter || m.RaftAddr != extra[1] || m.HTTPAddr != "127.0.0.1:9" {
		t.Fatalf("n9 = %+v, %v; want non-voter at %s", m, ok, extra[1])
	}
	if len(ms) != 4 {
		t.Fatalf("%d members, want 4: %+v", len(ms), ms)
	}
	if err := leader.N().RemoveServer(ctx, "n9"); err != nil {
		t.Fatalf("remove n9: %v", err)
	}
}

// RemoveServer drops a follower from the configuration and the member table, and the
// removed server does not add itself back.
func TestNode_RemoveServer(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	victim := c.followers(leader)[0]
	wait.For(t, 10*time.Second, "the victim's member record", func() bool {
		_, ok := leader.st.Member(victim.id)
		return ok
	})
	ctx := ctxTimeout(t, 10*time.Second)
	if err := victim.N().RemoveServer(ctx, victim.id); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("remove on a follower: %v, want ErrNotLeader", err)
	}
	if err := leader.N().RemoveServer(ctx, "nobody"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("remove unknown: %v, want model.ErrNotFound", err)
	}
	if err := leader.N().RemoveServer(ctx, victim.id); err != nil {
		t.Fatalf("remove: %v", err)
	}
	gone := func() bool {
		ms, err := leader.N().Members(ctx)
		if err != nil {
			return false
		}
		_, inConfig := membersByID(ms)[victim.id]
		_, recorded := leader.st.Member(victim.id)
		return len(ms) == 2 && !inConfig && !recorded
	}
	if !gone() {
		t.Fatalf("victim still listed after RemoveServer")
	}
	// The cluster keeps committing, and the removed server stays out across several
	// of its registration rounds.
	deadline := time.Now().Add(5 * registrarInterval)
	for time.Now().Before(deadline) {
		mustApplyNamespace(t, leader.N(), "still-writable")
		if !gone() {
			t.Fatalf("removed server is back in the cluster")
		}
	}
}

// TransferLeadership moves leadership to the named voter; unknown ids are
// model.ErrNotFound and followers refuse with ErrNotLeader.
func TestNode_TransferLeadership(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := leader.N().TransferLeadership(ctx, "nobody"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("transfer to unknown: %v, want model.ErrNotFound", err)
	}
	target := c.followers(leader)[1]
	if err := target.N().TransferLeadership(ctx, leader.id); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("transfer on a follower: %v, want ErrNotLeader", err)
	}
	if err := leader.N().TransferLeadership(ctx, target.id); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	if got := c.waitForLeader(10 * time.Second); got != target {
		t.Fatalf("leader after transfer = %s, want %s", got.id, target.id)
	}
	mustApplyNamespace(t, target.N(), "after-transfer")
}

// Joins of servers that never come up cost the cluster nothing: each is added as a
// non-voter and never promoted, so the quorum stays that of the three real voters.
// (Added as voters, the third join left 3 live voters of 6 and the cluster without a
// quorum.)
func TestNode_JoinsOfDeadServersKeepTheQuorum(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	ctx := ctxTimeout(t, 30*time.Second)
	fakes := freeAddrs(t, 3) // nothing listens there
	for i, addr := range fakes {
		id := "fake" + string(rune('1'+i))
		if err := leader.N().Join(ctx, JoinRequest{ID: id, RaftAddr: addr, HTTPAddr: "127.0.0.1:9"}); err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
	}
	mustApplyNamespace(t, leader.N(), "after-fake-joins")
	// Well past the promotion delay, the fakes are still non-voters and writes commit.
	deadline := time.After(3 * leader.N().cfg.PromoteAfter)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for watching := true; watching; {
		select {
		case <-deadline:
			watching = false
		case <-tick.C:
		}
		mustApplyNamespace(t, leader.N(), "still-writable")
		ms, err := leader.N().Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		voters := 0
		for _, m := range ms {
			if m.Voter {
				voters++
			}
			if strings.HasPrefix(m.ID, "fake") && m.Voter {
				t.Fatalf("%s became a voter: %+v", m.ID, ms)
			}
		}
		if len(ms) != 6 || voters != 3 {
			t.Fatalf("%d members, %d voters: %+v", len(ms), voters, ms)
		}
	}
	for i := range fakes {
		if err := leader.N().RemoveServer(ctx, "fake"+string(rune('1'+i))); err != nil {
			t.Fatalf("remove fake%d: %v", i+1, err)
		}
	}
}

// A join never takes a live server's place: not its Raft address, and not its id at
// another address while the leader still reaches it.
func TestNode_JoinNeverDisplacesALiveServer(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(leader)[0]
	wait.For(t, 10*time.Second, "the leader's contact with the follower", func() bool { return leader.N().reachable(raft.ServerID(f.id)) })
	before := leader.N().Raft().GetConfiguration()
	if err := before.Error(); err != nil {
		t.Fatal(err)
	}
	other := freeAddrs(t, 1)[0]
	for _, req := range []JoinRequest{
		{ID: "intruder", RaftAddr: f.raftAddr, HTTPAddr: "127.0.0.1:9"},
		{ID: f.id, RaftAddr: other, HTTPAddr: f.httpAddr},
	} {
		if err := leader.N().Join(ctx, req); !errors.Is(err, model.ErrConflict) {
			t.Fatalf("join %+v: %v, want a conflict", req, err)
		}
	}
	after := leader.N().Raft().GetConfiguration()
	if err := after.Error(); err != nil {
		t.Fatal(err)
	}
	if after.Index() != before.Index() {
		t.Fatalf("a refused join changed the configuration: %+v", after.Configuration().Servers)
	}
	ms, err := leader.N().Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := membersByID(ms)[f.id]; !m.Voter || m.RaftAddr != f.raftAddr {
		t.Fatalf("follower after the refused joins: %+v", m)
	}
}

// The first leader gives the cluster an identity, every node records it in its data
// directory, and a join from another cluster is refused.
func TestNode_ClusterIdentity(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	var id string
	wait.For(t, 10*time.Second, "the cluster id on every node and in every data directory", func() bool {
		id = leader.N().ClusterID()
		if id == "" {
			return false
		}
		for _, tn := range c.nodes {
			got, err := readClusterIDFile(tn.dir)
			if err != nil || got != id || tn.N().ClusterID() != id {
				return false
			}
		}
		return true
	})
	ctx := ctxTimeout(t, 20*time.Second)
	addr := freeAddrs(t, 1)[0]
	err := leader.N().Join(ctx, JoinRequest{ID: "stranger", RaftAddr: addr, HTTPAddr: "127.0.0.1:9", ClusterID: "another-cluster"})
	if !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("join from another cluster: %v, want ErrClusterMismatch", err)
	}
	if _, ok := leader.st.Member("stranger"); ok {
		t.Fatal("the stranger was recorded")
	}
	if err := leader.N().Join(ctx, JoinRequest{ID: "friend", RaftAddr: addr, HTTPAddr: "127.0.0.1:9", ClusterID: id, NonVoter: true}); err != nil {
		t.Fatalf("join with this cluster's id: %v", err)
	}
	// The identity survives a restart of every node.
	for _, tn := range c.nodes {
		c.stop(tn)
	}
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader = c.waitForLeader(10 * time.Second)
	if got := leader.N().ClusterID(); got != id {
		t.Fatalf("after restarts the cluster id is %q, want %q", got, id)
	}
}
