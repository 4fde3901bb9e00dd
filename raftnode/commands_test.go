package raftnode

import (
	"errors"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// Batches are written only while every server announced that it applies them: a server
// whose member record says otherwise (an older version during a rolling upgrade), and
// that has not announced itself to the current leader, closes the gate until it does.
func TestNode_ServersApplyFollowsMemberRecords(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	wait.For(t, 10*time.Second, "every server to announce the batch command", func() bool {
		return leader.N().ServersApply(fsm.BatchType)
	})
	if leader.N().ServersApply(fsm.NewestType + 1) {
		t.Fatal("ServersApply is true for a type no server knows")
	}

	old := c.followers(leader)[0]
	c.stop(old)                                                                     // it cannot correct its record while it is down
	rec := model.Member{ID: old.id, RaftAddr: old.raftAddr, HTTPAddr: old.httpAddr} // as an older server records itself
	if _, err := leader.N().Apply(ctxTimeout(t, 5*time.Second), fsm.UpsertMemberRequest{Member: rec}); err != nil {
		t.Fatal(err)
	}
	// The leader heard the server announce batches; a new leader knows only the record.
	next := c.followers(leader)[0] // the running one: old is down
	if err := leader.N().TransferLeadership(ctxTimeout(t, 10*time.Second), next.id); err != nil {
		t.Fatal(err)
	}
	leader = next
	wait.For(t, 10*time.Second, "the gate to close for a server that does not announce batches", func() bool {
		return leader.N().IsLeader() && !leader.N().ServersApply(fsm.BatchType)
	})

	c.start(old, "")
	wait.For(t, 15*time.Second, "the restarted server to announce the batch command again", func() bool {
		return leader.N().ServersApply(fsm.BatchType)
	})
}

// Propose returns before the entry commits; Wait gives the state machine's result of
// every command of a batch.
func TestNode_ProposeBatch(t *testing.T) {
	c := mustNewCluster(t, 3)
	leader := c.waitForLeader(10 * time.Second)
	wait.For(t, 10*time.Second, "every server to announce the batch command", func() bool {
		return leader.N().ServersApply(fsm.BatchType)
	})
	enc := func(cmd fsm.Command) []byte {
		b, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	p, err := leader.N().Propose(ctxTimeout(t, 5*time.Second), fsm.BatchRequest{Commands: [][]byte{
		enc(fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "batched"}}),
		enc(fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "not valid!"}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Batch) != 2 || res.Batch[0] != nil || !errors.Is(res.Batch[1], model.ErrInvalid) {
		t.Fatalf("batch results %v, want [nil, invalid]", res.Batch)
	}
	for _, tn := range c.nodes {
		wait.For(t, 10*time.Second, tn.id+" applies the batch", func() bool { return hasNamespace(tn, "batched") })
	}
	if _, err := c.followers(leader)[0].N().Propose(ctxTimeout(t, 5*time.Second), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "x"}}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Propose on a follower: %v, want ErrNotLeader", err)
	}
}
