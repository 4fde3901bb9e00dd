package raftnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/internal/wait"
)

// slowLibraryCommit makes the library alone propagate a commit index 2-4 s after the
// last write (CommitTimeout, randomised), and removes the other writers (the member
// registrar), so that only the commit notifier can get a write to the followers sooner.
func slowLibraryCommit(c *Config) {
	c.CommitTimeout = 2 * time.Second
	c.Joiner = nil
}

// waitFollowersApplied waits until every follower of leader applied idx, within 1 s.
func waitFollowersApplied(t *testing.T, c *testCluster, leader *testNode, idx uint64) {
	t.Helper()
	for _, f := range c.followers(leader) {
		wait.For(t, time.Second, fmt.Sprintf("%s to apply index %d", f.id, idx), func() bool {
			return f.sm.AppliedIndex() >= idx
		})
	}
}

// Followers apply a leader's write long before the library would tell them it is
// committed.
func TestCommitNotify_FollowersApplyWithoutCommitTimeout(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.mod = slowLibraryCommit
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader := c.waitForLeader(10 * time.Second)
	for i := range 5 {
		idx := mustApplyNamespace(t, leader.N(), fmt.Sprintf("ns-%d", i))
		waitFollowersApplied(t, c, leader, idx)
	}
}

// A node that leads again in a later term notifies with what it learns in that term:
// leadership moves away and back, and writes of each leader still reach the followers.
func TestCommitNotify_AcrossLeaderChanges(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.mod = slowLibraryCommit
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	first := c.waitForLeader(10 * time.Second)
	waitFollowersApplied(t, c, first, mustApplyNamespace(t, first.N(), "first"))

	if err := first.N().Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("transfer leadership away from %s: %v", first.id, err)
	}
	second := c.waitForLeader(10 * time.Second)
	if second == first {
		t.Fatalf("%s still leads after the transfer", first.id)
	}
	waitFollowersApplied(t, c, second, mustApplyNamespace(t, second.N(), "second"))

	if err := second.N().Raft().LeadershipTransferToServer(raft.ServerID(first.id), raft.ServerAddress(first.raftAddr)).Error(); err != nil {
		t.Fatalf("transfer leadership back to %s: %v", first.id, err)
	}
	again := c.waitForLeader(10 * time.Second)
	if again != first {
		t.Fatalf("%s leads, want %s", again.id, first.id)
	}
	waitFollowersApplied(t, c, first, mustApplyNamespace(t, first.N(), "again"))
}
