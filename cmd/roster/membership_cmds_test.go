package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// promoteSoon gives a joined server its vote after half a second caught up.
func promoteSoon(c *server.Config) { c.Raft.PromoteAfter = 500 * time.Millisecond }

// startLoneServer starts a server with neither peers nor a join target: it waits,
// without a cluster, until one adds it. It returns the server and its Raft address.
func startLoneServer(t *testing.T, id string) (*server.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{
		NodeID: id, DataDir: filepath.Join(t.TempDir(), id),
		HTTPAddr: "127.0.0.1:0", RaftAddr: ln.Addr().String(), RaftListener: ln,
		Logger: slog.New(slog.DiscardHandler),
	}
	steadyTimeouts(&cfg)
	promoteSoon(&cfg)
	cfg.Health.Policy = servertest.LoopbackPolicy()
	cfg.Health.Dial = servertest.GuardDial(t, cfg.Health.Policy.Dialer())
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return srv, ln.Addr().String()
}

// membersOf lists the members as the node at addr sees them (nil on error).
func membersOf(ctx context.Context, addr string) map[string]api.Member {
	res, _, err := client.New(addr, client.WithTimeout(2*time.Second)).Members(ctx, client.QueryOptions{})
	if err != nil {
		return nil
	}
	out := make(map[string]api.Member, len(res.Members))
	for _, m := range res.Members {
		out[m.ID] = m
	}
	return out
}

// leaderOf is the leader id as the node at addr knows it ("" when none or on error).
func leaderOf(ctx context.Context, addr string) string {
	l, err := client.New(addr, client.WithTimeout(2*time.Second)).Leader(ctx)
	if err != nil {
		return ""
	}
	return l.ID
}

// roster join adds a waiting server, which gets a vote; roster leader transfer hands
// leadership to it (by id) and back (to any voter); roster members remove takes it out.
func TestMembershipCLI_JoinTransferRemove(t *testing.T) {
	c := servertest.New(t, 1, steadyTimeouts, promoteSoon)
	c.MustLeader()
	ctx := cliCtx(t)
	n1 := c.Nodes[0].HTTPAddr
	n2, n2Raft := startLoneServer(t, "n2")

	r := runCLI(t, nil, "join", n2.HTTPAddr(), "--id", "n2", "--raft-addr", n2Raft, "--addr", n1)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "asked the cluster to add n2 (raft "+n2Raft) {
		t.Fatalf("stdout %q", r.stdout)
	}
	wait.For(t, 30*time.Second, "n2 to be a voter known to both nodes", func() bool {
		m1, m2 := membersOf(ctx, n1), membersOf(ctx, n2.HTTPAddr())
		return m1["n2"].Voter && m1["n2"].HTTPAddr != "" && m2["n1"].Leader
	})

	r = runCLI(t, nil, "members", "--addr", n2.HTTPAddr(), "-o", "json")
	wantExit(t, r, 0)
	var ms api.MembersResponse
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || len(ms.Members) != 2 {
		t.Fatalf("members -o json: %v\n%s", err, r.stdout)
	}

	r = runCLI(t, nil, "leader", "transfer", "n2", "--addr", n1)
	wantExit(t, r, 0)
	if f := strings.Fields(r.stdout); len(f) < 4 || f[3] != "n2" {
		t.Fatalf("leader transfer n2 printed %q, want the leader table with n2", r.stdout)
	}
	if l := leaderOf(ctx, n1); l != "n2" {
		t.Fatalf("leader is %q after the transfer, want n2", l)
	}

	// A server that is not a member, and one server too many, change nothing.
	wantExit(t, runCLI(t, nil, "leader", "transfer", "n9", "--addr", n1), exitError)
	wantExit(t, runCLI(t, nil, "leader", "transfer", "n1", "n2", "--addr", n1), exitUsage)

	r = runCLI(t, nil, "leader", "transfer", "-o", "json", "--addr", n2.HTTPAddr())
	wantExit(t, r, 0)
	var l api.Leader
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.ID != "n1" {
		t.Fatalf("leader transfer -o json: %v\n%s", err, r.stdout)
	}

	wantExit(t, runCLI(t, nil, "members", "remove", "--addr", n1), exitUsage)
	r = runCLI(t, nil, "members", "remove", "n2", "--addr", n1, "-o", "json")
	wantExit(t, r, 0)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index == 0 {
		t.Fatalf("members remove -o json: %v\n%s", err, r.stdout)
	}
	if ms := membersOf(ctx, n1); len(ms) != 1 || !ms["n1"].Leader {
		t.Fatalf("members after the removal: %+v", ms)
	}
	r = runCLI(t, nil, "members", "remove", "n2", "--addr", n1)
	wantExit(t, r, exitError)
	if !strings.Contains(r.stderr, "not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestJoin_SendsTheJoinRequest(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"POST /v1/cluster/join": {body: `{"index":9}`}})
	r := runCLI(t, nil, "join", "https://127.0.0.4:8004", "--id", "n4", "--raft-addr", "127.0.0.4:7004", "--non-voter",
		"--addr", f.addr(), "-o", "json")
	wantExit(t, r, 0)
	assertCall(t, f, "POST", "/v1/cluster/join", nil,
		`{"id":"n4","raftAddr":"127.0.0.4:7004","httpAddr":"https://127.0.0.4:8004","nonVoter":true}`)
	var res api.WriteResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Index != 9 {
		t.Fatalf("stdout %q (%v)", r.stdout, err)
	}
}

func TestJoin_BadInputExits2AndSendsNothing(t *testing.T) {
	f := newFakeAPI(t, nil)
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"join", "127.0.0.4:8004", "--raft-addr", "127.0.0.4:7004"}, nil, "--id is required"},
		{[]string{"join", "127.0.0.4:8004", "--id", "n4"}, nil, "--raft-addr is required"},
		// The listen address of a node's environment is not an address to dial.
		{[]string{"join", "127.0.0.4:8004", "--id", "n4"}, map[string]string{"ROSTER_RAFT_ADDR": ":7848"}, `--raft-addr ":7848": want a host`},
		{[]string{"join", "127.0.0.4:8004", "--id", "n4", "--raft-addr", "0.0.0.0:7004"}, nil, "not an address other servers can dial"},
		{[]string{"join", "127.0.0.4:8004", "--id", "n4", "--raft-addr", "127.0.0.4"}, nil, "want host:port"},
		{[]string{"join", "127.0.0.4:8004", "--id", "n4", "--raft-addr", "127.0.0.4:0"}, nil, "port must be 1..65535"},
		{[]string{"join", "8004", "--id", "n4", "--raft-addr", "127.0.0.4:7004"}, nil, `HTTP_ADDR "8004"`},
		{[]string{"join", "--id", "n4", "--raft-addr", "127.0.0.4:7004"}, nil, "usage: roster join"},
	}
	for _, tc := range cases {
		r := runCLI(t, tc.env, append(tc.args, "--addr", f.addr())...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := f.callCount(); n != 0 {
		t.Fatalf("fake API saw %d calls, want 0", n)
	}
}

// `roster server --join --non-voter` asks to join without a vote: the join request the
// started node sends says so.
func TestServerCLI_NonVoterJoinRequest(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"POST /v1/cluster/join": {body: `{"index":3}`}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _, stderr := newTestApp(t, nil)
	a.startNode = startNode
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"server", "--node-id", "n2", "--data-dir", t.TempDir(),
			"--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--join", f.addr(), "--non-voter",
			"--dns-addr", "", "--grpc-addr", "off", "--probe-allow", "127.0.0.0/8", "--log-level", "error"}, a)
	}()
	wait.For(t, 20*time.Second, "the node's join request", func() bool { return f.callCount() > 0 })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
	c := f.onlyCall(t)
	var req api.JoinRequest
	if err := json.Unmarshal([]byte(c.body), &req); err != nil {
		t.Fatalf("join body %q: %v", c.body, err)
	}
	if c.path != "/v1/cluster/join" || req.ID != "n2" || !req.NonVoter || !strings.HasPrefix(req.RaftAddr, "127.0.0.1:") {
		t.Fatalf("join request %s %+v, want n2 with nonVoter", c.path, req)
	}
}
