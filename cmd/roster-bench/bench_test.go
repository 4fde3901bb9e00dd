package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
)

// cliResult is one command line's outcome.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs roster-bench in-process with args.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func wantExit(t *testing.T, r cliResult, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
}

func cliCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// steadyTimeouts are hashicorp/raft's default timers: under the race detector on a busy
// machine the tests' fast ones can depose leaders in the middle of a test.
func steadyTimeouts(c *server.Config) {
	c.Raft.HeartbeatTimeout = time.Second
	c.Raft.ElectionTimeout = time.Second
	c.Raft.LeaderLeaseTimeout = 500 * time.Millisecond
}

// TestUsageErrors_ExitTwo: a flag roster-bench does not know is a usage error (exit 2),
// named on stderr.
func TestUsageErrors_ExitTwo(t *testing.T) {
	r := runCLI(t, "--no-such-flag")
	if r.code != exitUsage || !strings.Contains(r.stderr, "roster-bench: unknown flag: --no-such-flag") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

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
	r := runCLI(t, "--endpoints", "127.0.0.1:1", "--workload", "watch", "--consistency", "stale",
		"--watch-transport", "websocket", "--quiet")
	if r.code == 0 || !strings.Contains(r.stderr, `watch transport "websocket"`) {
		t.Errorf("bad --watch-transport: code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, "--endpoints", "127.0.0.1:1", "--workload", "watch", "--consistency", "linearizable", "--quiet")
	if r.code == 0 || !strings.Contains(r.stderr, "--consistency stale") {
		t.Errorf("linearizable SSE watch: code %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, "fanout", "--watchers", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "--endpoint is required") {
		t.Errorf("fanout without --endpoint: code %d, stderr %q", r.code, r.stderr)
	}
}

// roster-bench against a node with ACLs and TLS: with --token and --ca-file every
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
	args := []string{"--endpoints", c.Nodes[0].URL(), "--ca-file", c.TLS.CAFile, "--workload", "register,read",
		"--concurrency", "2", "--duration", "300ms", "--warmup", "0s", "--services", "3", "--quiet"}
	r := runCLI(t, append(args, "--token", boot.SecretID, "--json", report)...)
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
	r = runCLI(t, args...)
	if r.code == 0 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("bench without a token: exit %d, stderr %q", r.code, r.stderr)
	}
}

// roster-bench measures a TLS cluster with --ca-file and a client certificate: every
// request succeeds over HTTPS; without the CA the bench cannot start.
func TestTLS_BenchOverHTTPS(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), servertest.WithTLSVerifyIncoming())
	c.MustLeader()
	out := filepath.Join(t.TempDir(), "bench.json")
	r := runCLI(t, "--endpoints", c.Nodes[0].HTTPAddr, "--ca-file", c.TLS.CAFile,
		"--cert-file", c.TLS.ClientCertFile, "--key-file", c.TLS.ClientKeyFile,
		"--workload", "register,read", "--concurrency", "2", "--services", "2", "--duration", "200ms", "--warmup", "0s",
		"--quiet", "--json", out)
	if r.code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Workload string `json:"workload"`
			Requests uint64 `json:"requests"`
			Errors   uint64 `json:"errors"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 2 {
		t.Fatalf("report %s: %v", b, err)
	}
	for _, res := range rep.Results {
		if res.Requests == 0 || res.Errors != 0 {
			t.Errorf("%s: %d requests, %d errors", res.Workload, res.Requests, res.Errors)
		}
	}
	if r := runCLI(t, "--endpoints", c.Nodes[0].HTTPAddr, "--workload", "read", "--concurrency", "1",
		"--duration", "100ms", "--warmup", "0s", "--quiet"); r.code == 0 {
		t.Fatalf("bench without TLS succeeded:\n%s", r.stdout)
	}
}
