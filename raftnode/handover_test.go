package raftnode

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// Handover on the leader moves leadership to another voter, which every node then
// follows, and the old leader takes no write from then on.
func TestNode_HandoverMovesLeadership(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(t, leader.N(), "before")
	to, err := leader.N().Handover(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if to == "" || to == leader.id {
		t.Fatalf("handed over to %q", to)
	}
	if leader.N().Raft().State() == raft.Leader {
		t.Fatal("the old leader still leads")
	}
	wait.For(t, 10*time.Second, "every node to follow "+to, func() bool {
		for _, tn := range c.running() {
			if _, id := tn.N().Raft().LeaderWithID(); string(id) != to {
				return false
			}
		}
		return true
	})
	var next *testNode
	for _, tn := range c.nodes {
		if tn.id == to {
			next = tn
		}
	}
	wait.For(t, 10*time.Second, to+" to be a ready leader", func() bool { return next.N().leaderReady() })
	mustApplyNamespace(t, next.N(), "after")

	// The old leader is stopping: it refuses writes (as not the leader, so they are
	// sent on) and is not ready.
	_, err = leader.N().Apply(ctxTimeout(t, time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "x", Name: "x"}})
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, errHandingOver) {
		t.Fatalf("write on the stopping node: %v", err)
	}
	if ok, rd := leader.N().Ready(); ok || rd.Reason != "stopping" {
		t.Fatalf("stopping node ready = %v (%q)", ok, rd.Reason)
	}
}

// Writes in flight when the hand-over starts are all answered, as applied or as
// refused (not the leader: never applied); none is left with an unknown outcome
// (leadership lost, timeout).
func TestNode_HandoverAnswersWritesInFlight(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	n := leader.N()
	const writers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var applied, refused int
	var unknown []error
	started := make(chan struct{}, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if i == 1 {
					started <- struct{}{}
				}
				_, err := n.Apply(ctxTimeout(t, 10*time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: id, Name: id}})
				mu.Lock()
				switch {
				case err == nil:
					applied++
				case errors.Is(err, ErrNotLeader):
					refused++
				default:
					unknown = append(unknown, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	for range writers {
		<-started
	}
	if _, err := n.Handover(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(unknown) > 0 {
		t.Fatalf("%d writes with an unknown outcome, e.g. %v", len(unknown), unknown[0])
	}
	if applied < writers || refused != writers {
		t.Fatalf("applied %d, refused %d; want at least %d applied and every writer refused once", applied, refused, writers)
	}
}

// A follower, or a leader without another voter, has nothing to hand over; it stops
// taking writes all the same.
func TestNode_HandoverWithoutAnotherVoter(t *testing.T) {
	c := mustNewCluster(t, 1)
	tn := c.waitForLeader(10 * time.Second)
	// An explicit transfer says why it cannot happen (409, not 500).
	if err := tn.N().TransferLeadership(ctxTimeout(t, 5*time.Second), ""); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("transfer without another voter: %v, want a conflict", err)
	}
	to, err := tn.N().Handover(ctxTimeout(t, 5*time.Second))
	if err != nil || to != "" {
		t.Fatalf("handover of a single node: %q, %v", to, err)
	}
	if tn.N().Raft().State() != raft.Leader {
		t.Fatal("a single node lost its leadership")
	}
	if _, err := tn.N().Apply(ctxTimeout(t, time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "x", Name: "x"}}); !errors.Is(err, errHandingOver) {
		t.Fatalf("write after the handover: %v", err)
	}

	c3 := mustNewCluster(t, 3)
	leader := c3.waitForLeader(10 * time.Second)
	f := c3.followers(leader)[0]
	if to, err := f.N().Handover(ctxTimeout(t, 5*time.Second)); err != nil || to != "" {
		t.Fatalf("handover of a follower: %q, %v", to, err)
	}
	if _, id := leader.N().Raft().LeaderWithID(); string(id) != leader.id || leader.N().Raft().State() != raft.Leader {
		t.Fatal("a follower's handover moved leadership")
	}
}

// A restarted follower is not ready until it has applied what the leader had committed
// when it first heard from it, however little that is (the MaxLag allowance applies
// only afterwards); then it stays ready while a little behind.
func TestNode_RestartedFollowerReadyOnceCaughtUp(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	f := c.followers(leader)[0]
	c.stop(f)
	var last uint64
	for i := range 20 {
		last = mustApplyNamespace(t, leader.N(), fmt.Sprintf("while-down-%d", i))
	}
	c.start(f, "")
	n := f.N()
	// Ready is not asked until the node knows the leader and its commit index; then
	// the leader is made to have committed more than the follower can have.
	wait.For(t, 10*time.Second, "the restarted follower to hear the leader's commit index", func() bool {
		_, id := n.Raft().LeaderWithID()
		return string(id) == leader.id && n.commit.idx.Load() >= last
	})
	ahead := n.sm.AppliedIndex() + 200
	n.commit.note(ahead)
	if ok, rd := n.Ready(); ok || !strings.Contains(rd.Reason, "catching up") {
		t.Fatalf("ready %v (%q) with %d entries to go, want catching up", ok, rd.Reason, ahead-n.sm.AppliedIndex())
	}
	for i := range 200 {
		last = mustApplyNamespace(t, leader.N(), fmt.Sprintf("after-%d", i))
	}
	wait.For(t, 10*time.Second, "the follower to catch up and be ready", func() bool {
		ok, _ := n.Ready()
		return ok
	})
	if applied := n.sm.AppliedIndex(); applied < ahead {
		t.Fatalf("ready at applied index %d, before %d", applied, ahead)
	}
	// Caught up once: a follower a little behind the leader stays ready.
	n.commit.note(last + 100)
	if ok, rd := n.Ready(); !ok {
		t.Fatalf("not ready 100 entries behind after catching up: %q", rd.Reason)
	}
}
