package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/store"
)

// roster check passes a stopped node's untouched data directory, finds a state file
// changed after the clean shutdown, and refuses a running node.
func TestCheck_StoppedNode(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	registerN(ctx, t, c.Nodes[0].Client(), "orders", 3)
	dir := c.Nodes[0].DataDir

	if r := runCLI(t, nil, "check", "--data-dir", dir); r.code == 0 || !strings.Contains(r.stderr, "running") {
		t.Fatalf("check of a running node: exit %d, %s", r.code, r.stderr)
	}
	c.Stop(0)
	r := runCLI(t, nil, "check", "--data-dir", dir, "-o", "json")
	var got server.DataDirCheck
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("check of the stopped node: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if !got.OK() || !got.ShutdownChecked || got.StateCounts.Instances != 3 || got.ClusterID == "" || got.Raft.Entries == 0 {
		t.Fatalf("check of an untouched directory: %+v", got)
	}

	st, err := store.Open(raftnode.StatePath(dir), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertMember(st.AppliedIndex(), model.Member{ID: "ghost", RaftAddr: "127.66.0.1:7848"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "check", "--data-dir", dir)
	if r.code == 0 || !strings.Contains(r.stdout, "state_mismatch") || !strings.Contains(r.stderr, "problem") {
		t.Fatalf("check of a changed state file: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
