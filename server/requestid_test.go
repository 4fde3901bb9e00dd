package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// withNodeLogs gives every node a debug logger of its own, into logs[node id].
func withNodeLogs(logs map[string]*syncBuffer) servertest.Option {
	return func(cfg *server.Config) {
		b := &syncBuffer{}
		logs[cfg.NodeID] = b
		cfg.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

var generatedID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Every answer carries an X-Request-Id: the client's when it is sane, a new one
// otherwise. A request a follower forwards reaches the leader with the same id, and
// both nodes' log lines about it carry it; the Nacos routes get ids too.
func TestRequestID_ForwardedAndLoggedOnBothNodes(t *testing.T) {
	logs := map[string]*syncBuffer{}
	c := servertest.New(t, 3, servertest.FastTimeouts(), withNodeLogs(logs))
	l := c.MustLeader()
	f := c.Followers()[0]
	leader, follower := c.Nodes[l], c.Nodes[f]
	ctx := ctxT(t, 60*time.Second)

	put := func(nd *servertest.Node, svc, id string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut,
			nd.URL()+"/v1/namespaces/public/groups/DEFAULT_GROUP/services/"+svc, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s via %s: %s", svc, nd.ID, resp.Status)
		}
		if got := resp.Header.Values("X-Request-Id"); len(got) != 1 {
			t.Fatalf("PUT %s via %s: X-Request-Id %q, want one value", svc, nd.ID, got)
		}
		return resp
	}
	loggedOn := func(nd *servertest.Node, id string) func() bool {
		return func() bool { return strings.Contains(logs[nd.ID].String(), "request_id="+id) }
	}

	// A sane id is kept, through the forwarding follower to the leader.
	const sane = "ops-Trace_42.a-b"
	resp := put(follower, "rid-kept", sane)
	if got := resp.Header.Get("X-Request-Id"); got != sane {
		t.Fatalf("X-Request-Id %q, want the client's %q", got, sane)
	}
	if by := resp.Header.Get(api.HeaderServedBy); by != follower.ID {
		t.Fatalf("served by %q, want the follower %s (it hands the write to the leader typed and answers)", by, follower.ID)
	}
	wait.For(t, 10*time.Second, "the follower to log the request id", loggedOn(follower, sane))
	wait.For(t, 10*time.Second, "the leader to log the request id", loggedOn(leader, sane))
	if fl := logs[follower.ID].String(); !strings.Contains(fl, `msg="handing the write to the leader"`) {
		t.Errorf("the follower logged no forwarding line:\n%s", fl)
	}
	if ll := logs[leader.ID].String(); !strings.Contains(ll, `msg="peer call: a forwarded write" node=`+leader.ID+` from=`+follower.ID) {
		t.Errorf("the leader logged no peer call from the follower:\n%s", ll)
	}

	// Insane ids (too long, characters outside the set) are replaced by a generated
	// one, which is what the leader sees.
	for i, bad := range []string{strings.Repeat("a", 65), "has space", `quote"`, "semi;colon", "ünïcode"} {
		resp := put(follower, fmt.Sprintf("rid-replaced-%d", i), bad)
		got := resp.Header.Get("X-Request-Id")
		if got == bad || !generatedID.MatchString(got) {
			t.Fatalf("incoming id %q: answered X-Request-Id %q, want a generated one", bad, got)
		}
		wait.For(t, 10*time.Second, "the leader to log the generated id "+got, loggedOn(leader, got))
	}

	// No id: one is generated, unique per request.
	a, b := put(leader, "rid-new-1", "").Header.Get("X-Request-Id"), put(leader, "rid-new-2", "").Header.Get("X-Request-Id")
	if !generatedID.MatchString(a) || !generatedID.MatchString(b) || a == b {
		t.Fatalf("generated ids %q and %q: want two distinct sane ids", a, b)
	}

	// The Nacos HTTP routes share the middleware.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, follower.URL()+"/nacos/v1/ns/instance/list?serviceName=rid-kept", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", "nacos-1")
	nresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = nresp.Body.Close()
	if got := nresp.Header.Get("X-Request-Id"); got != "nacos-1" {
		t.Fatalf("Nacos route: X-Request-Id %q, want nacos-1", got)
	}
	wait.For(t, 10*time.Second, "the follower to log the Nacos request id", loggedOn(follower, "nacos-1"))
}
