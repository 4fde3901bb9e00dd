package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// The log line a node without --acl-enabled writes once it sees the cluster's ACLs.
const mismatchLine = "ACL mismatch: the cluster has ACLs enabled but this node was started without --acl-enabled"

// jsonLogs returns a logger at debug level writing JSON lines to the returned sink.
func jsonLogs() (*slog.Logger, *syncLog) {
	logs := &syncLog{}
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

// linesWith returns the lines of logs that contain s.
func (l *syncLog) linesWith(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// A node started without --acl-enabled in a cluster whose ACLs are bootstrapped says so
// in its log once, at ERROR, without being asked anything (it watches the replicated
// state); later ACL changes do not repeat it. Made leader, it hands leadership to
// another voter, so the cluster keeps taking writes.
func TestACL_MismatchIsLoggedOnceAndTheNodeDoesNotStayLeader(t *testing.T) {
	c := newACLCluster(t)
	ctx := ctxT(t, 90*time.Second)
	f := c.Followers()[0]
	logger, logs := jsonLogs()
	c.Stop(f)
	c.Configure(f, func(cfg *server.Config) { cfg.ACLEnabled = false; cfg.Logger = logger })
	c.Start(f)
	// No request reaches the node: the line comes from the replicated state alone.
	wait.For(t, 10*time.Second, "the node without ACLs to log the mismatch", func() bool {
		return len(logs.linesWith(mismatchLine)) > 0
	})
	line := logs.linesWith(mismatchLine)[0]
	if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, `"acl_bootstrap_index":`) {
		t.Fatalf("mismatch line: %s, want level ERROR with the bootstrap index", line)
	}

	// Another ACL change, applied by the node, does not log it again.
	tok := c.token(ctx, t, "after the mismatch", api.ACLRules{Operator: "read"})
	if err := c.Nodes[f].Server.Node().FSM().WaitApplied(ctx, tok.CreateIndex); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.linesWith(mismatchLine)); n != 1 {
		t.Fatalf("the mismatch was logged %d times, want once", n)
	}

	// Leading, the node would make every forwarded write fail: it hands leadership away.
	// A transfer to it can time out under load (Raft gives it one election timeout):
	// ask again until it has led.
	wait.For(t, 30*time.Second, "the node without ACLs to lead and hand leadership away", func() bool {
		if len(logs.linesWith("handing leadership to another voter")) > 0 {
			return true
		}
		if l := c.Leader(); l >= 0 && l != f {
			if err := c.Nodes[l].Server.Node().TransferLeadership(ctx, c.Nodes[f].ID); err != nil {
				t.Logf("transfer leadership to the node without ACLs: %v", err)
			}
		}
		return false
	})
	var via int
	wait.For(t, 15*time.Second, "a write through another node to succeed", func() bool {
		l := c.Leader()
		if l < 0 || l == f {
			return false
		}
		via = l
		_, err := c.as(l, c.mgmt).RegisterInstance(ctx, ns, group, "svc", "127.0.0.1", 9, api.InstanceRequest{})
		return err == nil
	})
	if c.Leader() == f {
		t.Fatalf("the node without ACLs leads again after the write through %s", c.Nodes[via].ID)
	}
	if n := len(logs.linesWith(mismatchLine)); n != 1 {
		t.Fatalf("the mismatch was logged %d times by the end, want once", n)
	}
}

// A node with --acl-enabled in a cluster whose ACLs are not bootstrapped yet says once,
// at WARN, that it refuses requests until the bootstrap, and at INFO when the bootstrap
// arrives.
func TestACL_NotBootstrappedIsLoggedUntilTheBootstrap(t *testing.T) {
	logger, logs := jsonLogs()
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithACL(),
		func(cfg *server.Config) { cfg.Logger = logger })
	c.MustLeader()
	ctx := ctxT(t, 30*time.Second)
	const waiting = "ACLs are enabled on this node but the cluster has not bootstrapped them"
	wait.For(t, 10*time.Second, "the node to log that ACLs wait for the bootstrap", func() bool {
		return len(logs.linesWith(waiting)) > 0
	})
	if line := logs.linesWith(waiting)[0]; !strings.Contains(line, `"level":"WARN"`) {
		t.Fatalf("waiting line: %s, want level WARN", line)
	}
	if _, err := c.Nodes[0].Client().ACLBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the node to log the bootstrap", func() bool {
		l := logs.linesWith("ACLs bootstrapped: this node serves requests that carry a token")
		return len(l) == 1 && strings.Contains(l[0], `"level":"INFO"`)
	})
	if n := len(logs.linesWith(waiting)); n != 1 {
		t.Fatalf("the wait for the bootstrap was logged %d times, want once", n)
	}
}

// A node without --acl-enabled that cannot hand leadership away (it is the only voter)
// says so once at ERROR, and keeps trying quietly (DEBUG) every few seconds.
func TestACL_MismatchedLeaderWithoutAnotherVoterSaysWhyOnce(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithACL())
	c.MustLeader()
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.Nodes[0].Client().ACLBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	logger, logs := jsonLogs()
	c.Stop(0)
	c.Configure(0, func(cfg *server.Config) { cfg.ACLEnabled = false; cfg.Logger = logger })
	c.Start(0)
	const failed = "ACL mismatch: handing leadership away failed"
	wait.For(t, 20*time.Second, "a second, quiet attempt to hand leadership away", func() bool {
		for _, l := range logs.linesWith(failed) {
			if strings.Contains(l, `"level":"DEBUG"`) {
				return true
			}
		}
		return false
	})
	errorLines := 0
	for _, l := range logs.linesWith(failed) {
		if strings.Contains(l, `"level":"ERROR"`) {
			errorLines++
		}
	}
	if errorLines != 1 || len(logs.linesWith(mismatchLine)) != 1 {
		t.Fatalf("%d ERROR lines of the failed hand-over and %d of the mismatch, want one each:\n%s",
			errorLines, len(logs.linesWith(mismatchLine)), strings.Join(logs.linesWith("ACL"), "\n"))
	}
	if !c.Nodes[0].Server.Node().IsLeader() {
		t.Fatal("the only voter stopped leading")
	}
}
