package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
)

const autopilotBody = `{"healthy":false,"failureTolerance":0,"leader":"n1","voters":["n1","n2","n3"],
 "servers":[
  {"id":"n1","address":"127.0.0.1:7001","httpAddr":"127.0.0.1:8001","leader":true,"voter":true,"status":"leader","healthy":true,
   "lastContact":"0s","lastContactMillis":0,"lastTerm":4,"lastIndex":120,"trailingLogs":0,"stableSince":"2026-03-01T10:00:00Z"},
  {"id":"n2","address":"127.0.0.1:7002","httpAddr":"127.0.0.1:8002","leader":false,"voter":true,"status":"voter","healthy":true,
   "lastContact":"41ms","lastContactMillis":41,"lastTerm":4,"lastIndex":120,"trailingLogs":0,"stableSince":"2026-03-01T10:00:00Z"},
  {"id":"n3","address":"127.0.0.1:7003","httpAddr":"127.0.0.1:8003","leader":false,"voter":true,"status":"voter","healthy":false,
   "lastContact":"2m0s","lastContactMillis":120000,"lastTerm":4,"lastIndex":97,"trailingLogs":23,"stableSince":"2026-03-01T10:05:00Z",
   "reason":"no contact for 2m0s (threshold 500ms)"}],
 "config":{"cleanupDeadServers":true,"lastContactThreshold":"500ms","maxTrailingLogs":250,"serverStabilizationTime":"10s",
   "deadServerThreshold":"5m0s","minQuorum":3}}`

// roster autopilot health asks GET /v1/operator/autopilot/health and prints the
// summary and one row per server; -o json prints the response.
func TestAutopilotHealth_TableAndJSON(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"GET /v1/operator/autopilot/health": {body: autopilotBody}})
	r := runCLI(t, nil, "autopilot", "health", "--addr", f.addr())
	wantExit(t, r, 0)
	assertCall(t, f, "GET", "/v1/operator/autopilot/health", nil, "")
	for _, want := range []string{
		"Healthy: false  Failure tolerance: 0  Leader: n1  Voters: n1,n2,n3",
		"contact within 500ms, on the leader's term, at most 250 entries behind; dead-server cleanup on (dead after 5m0s, minimum quorum 3)",
		"STATUS", "STABLE_SINCE", "REASON",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	var n3 string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "n3 ") {
			n3 = line
		}
	}
	for _, want := range []string{"127.0.0.1:7003", "voter", "false", "2m0s", "97", "23", "no contact for 2m0s (threshold 500ms)"} {
		if !strings.Contains(n3, want) {
			t.Errorf("row of n3 %q lacks %q", n3, want)
		}
	}

	r = runCLI(t, nil, "autopilot", "health", "--addr", f.addr(), "-o", "json")
	wantExit(t, r, 0)
	var h api.AutopilotHealth
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
		t.Fatalf("stdout %q: %v", r.stdout, err)
	}
	if h.Leader != "n1" || len(h.Servers) != 3 || h.Servers[2].TrailingLogs != 23 || !h.Config.CleanupDeadServers ||
		!h.Servers[2].StableSince.Equal(time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)) {
		t.Fatalf("json output %+v", h)
	}
}

// The autopilot flags of roster server, and their ROSTER_* variables, reach the node's
// options; negative values are command-line errors (exit 2), refused before the node
// starts.
func TestServer_AutopilotFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &fakeNode{onStart: func(nodeOptions, *slog.Logger) { cancel() }}
	a, _, stderr := newTestApp(t, map[string]string{
		"ROSTER_CLEANUP_DEAD_SERVERS":  "true",
		"ROSTER_DEAD_SERVER_THRESHOLD": "90s",
		"ROSTER_AUTOPILOT_MIN_QUORUM":  "4",
	})
	a.startNode = node.start
	code := run(ctx, []string{"server", "--node-id", "n1", "--data-dir", "/d", "--autopilot-min-quorum", "5",
		"--autopilot-last-contact-threshold", "250ms", "--autopilot-max-trailing-logs", "1000"}, a)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := autopilotOptions{CleanupDeadServers: true, DeadServerThreshold: 90 * time.Second, MinQuorum: 5,
		LastContactThreshold: 250 * time.Millisecond, MaxTrailingLogs: 1000}
	if got := node.options(t).Autopilot; got != want {
		t.Fatalf("autopilot options %+v, want %+v", got, want)
	}
	if c := want.config(); !c.CleanupDeadServers || c.DeadServerThreshold != 90*time.Second || c.MinQuorum != 5 || c.LastContactThreshold != 250*time.Millisecond {
		t.Fatalf("node config %+v", c)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dead-server-threshold", "-1s"}, "roster: --dead-server-threshold -1s: must not be negative"},
		{[]string{"--autopilot-min-quorum", "-1"}, "roster: --autopilot-min-quorum -1: must not be negative"},
		{[]string{"--autopilot-last-contact-threshold", "-1ms"}, "roster: --autopilot-last-contact-threshold -1ms: must not be negative"},
	} {
		a, _, stderr := newTestApp(t, nil)
		a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
			t.Errorf("%v: node started", tc.args)
			return "", nil, errors.New("unexpected")
		}
		if code := run(context.Background(), append([]string{"server", "--node-id", "n1", "--data-dir", "/d"}, tc.args...), a); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, stderr.String(), tc.want)
		}
	}
}
