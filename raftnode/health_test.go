package raftnode

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// A follower whose Raft log cannot be written (a full disk) is not ready, says why, and
// is ready again with every write once the disk has room; the cluster loses nothing.
func TestReady_FollowerThatCannotWriteItsLog(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	f := c.followers(leader)[0]
	full := errors.New("write raft.db: no space left on device")
	f.N().append.fault.Store(&full)
	var last uint64
	for i := range 20 {
		last = mustApplyNamespace(t, leader.N(), "while-full-"+string(rune('a'+i)))
	}
	wait.For(t, 10*time.Second, "the follower to report the failing log", func() bool {
		ready, rep := f.N().Ready()
		return !ready && strings.Contains(rep.Reason, "cannot write the Raft log") && strings.Contains(rep.Reason, "no space left")
	})
	if ready, rep := leader.N().Ready(); !ready {
		t.Fatalf("the leader is not ready: %+v", rep)
	}
	f.N().append.fault.Store(nil)
	wait.For(t, 10*time.Second, "the follower to catch up and be ready", func() bool {
		ready, _ := f.N().Ready()
		return ready && f.sm.AppliedIndex() >= last
	})
}

// A node whose state machine cannot apply (the state file's disk is full) is not ready,
// says why, and resumes without losing or skipping an entry.
func TestReady_NodeThatCannotApply(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	f := c.followers(leader)[0]
	f.st.SetWriteFault(errors.New("write state.db: no space left on device"))
	last := mustApplyNamespace(t, leader.N(), "while-stalled")
	wait.For(t, 10*time.Second, "the follower to report the stalled apply", func() bool {
		ready, rep := f.N().Ready()
		return !ready && strings.Contains(rep.Reason, "cannot apply committed entries")
	})
	if f.sm.AppliedIndex() >= last {
		t.Fatal("the entry was applied while the state file failed")
	}
	f.st.SetWriteFault(nil)
	wait.For(t, 10*time.Second, "the follower to apply and be ready", func() bool {
		ready, _ := f.N().Ready()
		return ready && hasNamespace(f, "while-stalled")
	})
}

// A follower lagging what the leader committed by more than MaxLag is not ready, even
// while it applies all its own log holds.
func TestReady_LagBehindTheLeader(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	f := c.followers(leader)[0]
	f.N().cfg.MaxLag = 3
	// Right after the election the follower may still be applying what the new leader
	// committed (its first entries): wait until it has caught up.
	var (
		ready bool
		rep   Readiness
	)
	wait.For(t, 10*time.Second, "the follower ready before the test", func() bool {
		ready, rep = f.N().Ready()
		return ready
	})
	// The leader sends a commit index far beyond the follower's applied index.
	ahead := rep.CommitIndex + 10
	f.N().commit.note(ahead)
	ready, rep = f.N().Ready()
	if ready || !strings.Contains(rep.Reason, "behind the leader") || rep.LeaderCommitIndex != ahead {
		t.Fatalf("follower 10 entries behind: ready %v, %+v", ready, rep)
	}
}

// A leader that cannot write an entry to its own log answers ErrStorage: a *DiskError
// naming the failing write and the system's reason but no file path. The entry was not
// applied anywhere, and the cluster carries on under another leader.
func TestApply_LeaderThatCannotWriteItsLog(t *testing.T) {
	c := mustNewCluster(t, 3)
	var full error = &fs.PathError{Op: "write", Path: "/srv/secret-place/raft/raft.db", Err: syscall.ENOSPC}
	var (
		leader *testNode
		err    error
	)
	// On a loaded machine leadership can move between finding the leader and the
	// write: that attempt never reached the log, so the fault moves to the new leader.
	for attempt := 0; ; attempt++ {
		leader = c.waitForLeader(10 * time.Second)
		leader.N().append.fault.Store(&full)
		_, err = leader.N().Apply(ctxTimeout(t, 10*time.Second), fsm.UpsertNamespaceRequest{
			Namespace: model.Namespace{ID: "never", Name: "never"},
		})
		if !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrStorage) || attempt == 5 {
			break
		}
		leader.N().append.fault.Store(nil)
		t.Logf("attempt %d: leadership moved before the write (%v); again", attempt, err)
	}
	var de *DiskError
	if !errors.Is(err, ErrStorage) || !errors.As(err, &de) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("apply on a leader whose log cannot be written: %v (%T); want ErrStorage, a *DiskError wrapping ENOSPC", err, err)
	}
	if msg := err.Error(); strings.Contains(msg, "secret-place") || !strings.Contains(msg, "no space left on device") {
		t.Fatalf("error %q names a path or not the reason", msg)
	}
	if ready, rep := leader.N().Ready(); ready || strings.Contains(rep.Reason, "secret-place") || !strings.Contains(rep.Reason, "cannot write the Raft log") {
		t.Fatalf("the failing leader's readiness: ready %v, %+v", ready, rep)
	}
	leader.N().append.fault.Store(nil)
	next := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, next.N(), "after")
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, tn.N().ID()+" to apply the next write", func() bool { return hasNamespace(tn, "after") })
		if hasNamespace(tn, "never") {
			t.Fatalf("%s applied the write its leader could not log", tn.N().ID())
		}
	}
}
