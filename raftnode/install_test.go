package raftnode

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/internal/wait"
)

// A restore on the leader makes every follower install the snapshot at once. While
// they install (their main loops busy for longer than the leader lease), they still
// answer the leader's heartbeats, so the leader keeps its leadership and the restore
// succeeds. Without the answers the leader hears from no follower, steps down, and the
// restore fails with "leadership lost".
func TestNode_LeaderKeepsLeadershipWhileFollowersInstallASnapshot(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, leader.N(), "before")
	var state bytes.Buffer
	sn, err := leader.st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn.WriteTo(&state); err != nil {
		t.Fatal(err)
	}
	_ = sn.Close()
	idx := leader.st.AppliedIndex()

	gate := make(chan struct{})
	followers := c.followers(leader)
	for _, f := range followers {
		f.sm.restoreGate.Store(&gate)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := leader.N().RestoreState(ctxTimeout(t, 30*time.Second), idx, 1, bytes.NewReader(state.Bytes()), int64(state.Len()))
		done <- err
	}()
	wait.For(t, 15*time.Second, "both followers to be installing the snapshot", func() bool {
		return followers[0].sm.inRestore.Load() == 1 && followers[1].sm.inRestore.Load() == 1
	})
	lease := leader.N().cfg.LeaderLeaseTimeout
	blocked := time.Now()
	wait.For(t, 15*time.Second, "the leader to keep hearing from both installing followers past two lease timeouts", func() bool {
		if !leader.N().IsLeader() {
			t.Fatalf("%s lost leadership while the followers installed the snapshot", leader.id)
		}
		now := time.Now()
		for _, f := range followers {
			age, ok := leader.N().contactAge(raft.ServerID(f.id), now)
			if !ok || age > lease {
				return false
			}
		}
		return now.Sub(blocked) > 2*lease
	})
	release()
	if err := <-done; err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !leader.N().IsLeader() {
		t.Fatalf("%s is no longer the leader after the restore", leader.id)
	}
}
