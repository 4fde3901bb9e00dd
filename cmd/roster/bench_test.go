package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rosterhq/roster/server/servertest"
)

// TestBenchParsePids checks that an endpoint given as a URL and as host:port name the
// same process, as the leader's address is matched against --pids.
func TestBenchParsePids(t *testing.T) {
	m, err := benchParsePids([]string{"http://127.0.0.1:8848=11", "127.0.0.2:8848=12", "https://127.0.0.3:8848/=13"})
	if err != nil {
		t.Fatal(err)
	}
	for leader, want := range map[string]int{
		"http://127.0.0.1:8848": 11, "127.0.0.1:8848": 11, "http://127.0.0.2:8848": 12, "https://127.0.0.3:8848": 13,
	} {
		if got := m[endpointKey(leader)]; got != want {
			t.Errorf("leader %s: pid %d, want %d", leader, got, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:8848", "127.0.0.1:8848=x", "127.0.0.1:8848=0"} {
		if _, err := benchParsePids([]string{bad}); err == nil {
			t.Errorf("--pids %q accepted", bad)
		}
	}
}

// TestBench_RejectsBadWatchTransportAndFanoutWithoutEndpoint checks the flags' errors,
// which come before any request.
func TestBench_RejectsBadWatchTransportAndFanoutWithoutEndpoint(t *testing.T) {
	r := runCLI(t, nil, "bench", "--endpoints", "127.0.0.1:1", "--workload", "watch", "--consistency", "stale",
		"--watch-transport", "websocket", "--quiet")
	if r.code == 0 || !strings.Contains(r.stderr, `watch transport "websocket"`) {
		t.Errorf("bad --watch-transport: code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "bench", "--endpoints", "127.0.0.1:1", "--workload", "watch", "--consistency", "linearizable", "--quiet")
	if r.code == 0 || !strings.Contains(r.stderr, "--consistency stale") {
		t.Errorf("linearizable SSE watch: code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "bench", "fanout", "--watchers", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "--endpoint is required") {
		t.Errorf("fanout without --endpoint: code %d, stderr %q", r.code, r.stderr)
	}
}

// roster bench against a node with ACLs and TLS: with --token and --ca-file every
// workload's requests (setup, writes, reads) are authorized and verified, so the points
// finish without errors; without the token the bench fails at its first request.
func TestBench_ACLTokenAndTLS(t *testing.T) {
	c := servertest.New(t, 1, steadyTimeouts, servertest.WithACL(), servertest.WithTLS())
	c.MustLeader()
	ctx := cliCtx(t)
	boot, err := c.Nodes[0].Client().ACLBootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "bench.json")
	args := []string{"bench", "--endpoints", c.Nodes[0].URL(), "--ca-file", c.TLS.CAFile, "--workload", "register,read",
		"--concurrency", "2", "--duration", "300ms", "--warmup", "0s", "--services", "3", "--quiet"}
	r := runCLI(t, nil, append(args, "--token", boot.SecretID, "--json", report)...)
	wantExit(t, r, 0)
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Workload string  `json:"workload"`
			Requests int64   `json:"requests"`
			Errors   int64   `json:"errors"`
			RPS      float64 `json:"rps"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 2 {
		t.Fatalf("report %s (%v)", b, err)
	}
	for _, res := range rep.Results {
		if res.Errors != 0 || res.RPS <= 0 {
			t.Errorf("%s: %d errors, %.0f req/s", res.Workload, res.Errors, res.RPS)
		}
	}
	r = runCLI(t, nil, args...)
	if r.code == 0 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("bench without a token: exit %d, stderr %q", r.code, r.stderr)
	}
}
