package main

import (
	"strings"
	"testing"
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
