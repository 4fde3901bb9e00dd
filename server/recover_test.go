package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/raftnode"
)

// After a permanent loss of quorum, recover on the one surviving node (peers = just
// itself) lets it start alone as the leader of a one-node cluster with all its data.
func TestRecover_SurvivorLeadsAloneWithAllData(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	leader := c.MustLeader()
	last := fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t))
	// A Raft snapshot in the middle, so that recovery has both a snapshot and log
	// entries after it to deal with.
	noErr(t, c.Nodes[leader].Server.Node().Raft().Snapshot().Error())
	last = max(last, wrote(t)(c.Nodes[leader].Client().RegisterInstance(ctx, "staging", group, "svc-0", "127.107.7.7", 7, manual)))
	noErr(t, c.WaitApplied(ctx, last))

	survivor := c.Followers()[0]
	nd := c.Nodes[survivor]
	peers := []raftnode.Peer{{ID: nd.ID, Addr: nd.RaftAddr}}
	// Refused while the node runs.
	if err := raftnode.Recover(nd.DataDir, peers, nil); !errors.Is(err, raftnode.ErrNodeRunning) {
		t.Fatalf("recover on a running node: %v, want ErrNodeRunning", err)
	}
	want := logicalOf(dump(t, nd))

	c.Close() // the other two are gone for good
	if err := raftnode.Recover(nd.DataDir, peers, nil); err != nil {
		t.Fatalf("recover: %v", err)
	}
	c.Start(survivor)
	if got := c.MustLeader(); got != survivor {
		t.Fatalf("leader is node %d, want the survivor %d", got, survivor)
	}
	if got := logicalOf(dump(t, nd)); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after recovery:\n got %+v\nwant %+v", got, want)
	}
	cl := nd.Client()
	idx := wrote(t)(cl.RegisterInstance(ctx, "staging", group, "svc-0", "127.108.8.8", 8, manual))
	if idx <= last {
		t.Errorf("write after recovery at %d, not above %d", idx, last)
	}
	members, _, err := cl.Members(ctx, client.QueryOptions{})
	noErr(t, err)
	if len(members.Members) != 1 || members.Members[0].ID != nd.ID || !members.Members[0].Leader {
		t.Fatalf("members after recovery: %+v", members.Members)
	}
	// The stale member records of the lost servers can be removed like any other.
	for _, m := range want.Members {
		if m.ID != nd.ID {
			wrote(t)(cl.RemoveMember(ctx, m.ID))
		}
	}
	if rec := dump(t, nd).Members; len(rec) != 1 || rec[0].ID != nd.ID {
		t.Fatalf("member records after removing the lost servers: %+v", rec)
	}
	// It survives a restart with the recovered configuration.
	c.Stop(survivor)
	c.Start(survivor)
	if got := c.MustLeader(); got != survivor {
		t.Fatalf("after restart the leader is node %d", got)
	}
	if _, _, err := cl.Instance(ctx, "staging", group, "svc-0", "127.108.8.8", 8, client.QueryOptions{}); err != nil {
		t.Fatalf("write after recovery lost across a restart: %v", err)
	}
}

// Recover refuses what it cannot have been meant for, changing nothing.
func TestRecover_RefusesBadInput(t *testing.T) {
	empty := t.TempDir()
	peers := []raftnode.Peer{{ID: "n1", Addr: "127.0.0.1:7848"}}
	if err := raftnode.Recover(empty, peers, nil); err == nil {
		t.Fatal("recover of a directory without Raft state succeeded")
	}
	if _, err := os.Stat(filepath.Join(empty, "raft")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recover of an empty directory created files: %v", err)
	}
	if err := raftnode.Recover(empty, nil, nil); !errors.Is(err, raftnode.ErrInvalidConfig) {
		t.Fatalf("recover without peers: %v, want ErrInvalidConfig", err)
	}
	dup := []raftnode.Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n1", Addr: "127.0.0.1:2"}}
	if err := raftnode.Recover(empty, dup, nil); !errors.Is(err, raftnode.ErrInvalidConfig) {
		t.Fatalf("recover with duplicate peers: %v, want ErrInvalidConfig", err)
	}
}
