package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/nacos/udppush"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/store"
)

// fakeNode stands in for a real node: it records the options it was started with and
// serves /v1/status/ready, answering 503 for the first notReady polls.
type fakeNode struct {
	notReady int32
	onStart  func(o nodeOptions, log *slog.Logger)

	mu      sync.Mutex
	started []nodeOptions
	stopped int
	polls   atomic.Int32
	srv     *httptest.Server
}

func (n *fakeNode) start(o nodeOptions, log *slog.Logger) (string, func() error, error) {
	n.mu.Lock()
	n.started = append(n.started, o)
	n.mu.Unlock()
	if n.onStart != nil {
		n.onStart(o, log)
	}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status/ready" {
			http.NotFound(w, r)
			return
		}
		if n.polls.Add(1) <= n.notReady {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"ready":false,"reason":"electing"}`)
			return
		}
		_, _ = io.WriteString(w, `{"ready":true,"leader":"dev"}`)
	}))
	return n.srv.Listener.Addr().String(), func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.stopped++
		n.srv.Close()
		return nil
	}, nil
}

func (n *fakeNode) options(t *testing.T) nodeOptions {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.started) != 1 {
		t.Fatalf("node started %d times, want 1", len(n.started))
	}
	return n.started[0]
}

func (n *fakeNode) stopCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped
}

func TestServer_FlagsAndEnvBuildNodeOptions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &fakeNode{onStart: func(_ nodeOptions, log *slog.Logger) {
		log.Debug("debug logging on")
		cancel() // as if SIGTERM arrived right after the start
	}}
	env := map[string]string{
		"ROSTER_NODE_ID":                  "n1",
		"ROSTER_DATA_DIR":                 "/var/lib/roster",
		"ROSTER_HTTP_ADDR":                ":9000",
		"ROSTER_RAFT_ADDR":                ":9001",
		"ROSTER_HTTP_ADVERTISE":           "roster1:9000",
		"ROSTER_RAFT_ADVERTISE":           "roster1:9001",
		"ROSTER_PEERS":                    "n1=roster1:9001,n2=roster2:9001",
		"ROSTER_JOIN":                     "roster2:9000",
		"ROSTER_METADATA_MAX_BYTES":       "2048",
		"ROSTER_LOG_LEVEL":                "debug",
		"ROSTER_RAFT_HEARTBEAT_TIMEOUT":   "2s",
		"ROSTER_STATE_SYNC_INTERVAL":      "-1s",
		"ROSTER_PROBE_ALLOW":              "127.0.0.0/8,::1/128",
		"ROSTER_DNS_ADDR":                 "127.0.0.1:8653",
		"ROSTER_DNS_RATE_LIMIT":           "0",
		"ROSTER_READ_CACHE_SIZE":          "1048576",
		"ROSTER_COALESCE_WRITES":          "false",
		"ROSTER_NACOS_PUSH_CHANGE_BUDGET": "4096",
	}
	a, stdout, stderr := newTestApp(t, env)
	a.startNode = node.start
	code := run(ctx, []string{"server", "--raft-addr", "127.100.0.1:7000", "--node-id", "n9",
		"--raft-election-timeout", "3s", "--raft-leader-lease-timeout", "1s", "--probe-concurrency", "64", "--probe-deny", "127.0.0.9/32",
		"--dns-domain", "Example.internal", "--dns-ttl", "30s", "--dns-negative-ttl", "2s", "--dns-max-answers", "8",
		"--dns-rate-burst", "5", "--dns-max-stale", "1m", "--promote-after", "5s",
		"--nacos-push-max-per-port", "8", "--refuse-confusable-names"}, a)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	want := nodeOptions{
		NodeID:                "n9",
		DataDir:               "/var/lib/roster",
		HTTPAddr:              ":9000",
		HTTPAdvertise:         "roster1:9000",
		RaftAddr:              "127.100.0.1:7000",
		RaftAdvertise:         "roster1:9001",
		Peers:                 "n1=roster1:9001,n2=roster2:9001",
		Join:                  "roster2:9000",
		MetadataMaxBytes:      2048,
		HeartbeatTimeout:      2 * time.Second,
		ElectionTimeout:       3 * time.Second,
		LeaderLeaseTimeout:    time.Second,
		PromoteAfter:          5 * time.Second,
		StateSyncInterval:     -time.Second,
		ProbeConcurrency:      64,
		ProbeAllow:            "127.0.0.0/8,::1/128",
		ProbeDeny:             "127.0.0.9/32",
		DNSAddr:               "127.0.0.1:8653",
		DNSDomain:             "Example.internal",
		DNSTTL:                30 * time.Second,
		DNSNegativeTTL:        2 * time.Second,
		DNSMaxAnswers:         8,
		DNSRateBurst:          5,
		DNSMaxStale:           time.Minute,
		ReadCacheSize:         1 << 20,
		GRPCMaxConnsPerIP:     256,
		NacosPush:             server.NacosPushLimits{MaxPerAddr: udppush.DefaultMaxPerAddr, MaxPerPort: 8, ChangeBudget: 4096},
		RefuseConfusableNames: true,
		GRPCMaxUntrusted:      512,
		GRPCMaxUntrustedPerIP: 8,
		GRPCAcceptRatePerIP:   8,
	}
	if got := node.options(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("options\n got %+v\nwant %+v", got, want)
	}
	if node.stopCount() != 1 {
		t.Fatalf("node stopped %d times, want 1", node.stopCount())
	}
	logs := stderr.String()
	for _, s := range []string{"debug logging on", "roster started", "roster stopping"} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs lack %q:\n%s", s, logs)
		}
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q, want empty", stdout.String())
	}
}

func TestServer_Defaults(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &fakeNode{onStart: func(nodeOptions, *slog.Logger) { cancel() }}
	a, _, stderr := newTestApp(t, nil)
	a.startNode = node.start
	if code := run(ctx, []string{"server", "--node-id", "n1", "--data-dir", "/d"}, a); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := nodeOptions{NodeID: "n1", DataDir: "/d", HTTPAddr: ":8848", RaftAddr: ":7848",
		ProbeDeny: healthcheck.DefaultProbeDeny,
		DNSAddr:   "127.0.0.1:8600", DNSDomain: "roster.", DNSTTL: 5 * time.Second, DNSMaxAnswers: 64,
		DNSRateLimit: 1000, DNSAddrOptional: true, ReadCacheSize: store.DefaultReadCacheSize, CoalesceWrites: true,
		GRPCMaxConnsPerIP: 256, GRPCMaxUntrusted: 512, GRPCMaxUntrustedPerIP: 8, GRPCAcceptRatePerIP: 8,
		NacosPush: server.NacosPushLimits{MaxPerAddr: udppush.DefaultMaxPerAddr, MaxPerPort: udppush.DefaultMaxPerPort,
			ChangeBudget: udppush.DefaultChangeBudget}}
	if got := node.options(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("options\n got %+v\nwant %+v", got, want)
	}
	if strings.Contains(stderr.String(), "level=DEBUG") {
		t.Fatalf("default log level shows debug: %s", stderr.String())
	}
}

func TestServer_InvalidSettingsExit2WithoutStarting(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"server", "--data-dir", "/d"}, nil, "roster: --node-id is required (or ROSTER_NODE_ID)\n"},
		{[]string{"server", "--node-id", "n1"}, nil, "roster: --data-dir is required (or ROSTER_DATA_DIR)\n"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--log-level", "loud"}, nil,
			"roster: --log-level \"loud\": want debug, info, warn or error\n"},
		{[]string{"server"}, map[string]string{"ROSTER_NODE_ID": "n1", "ROSTER_DATA_DIR": "/d", "ROSTER_METADATA_MAX_BYTES": "1k"}, "ROSTER_METADATA_MAX_BYTES"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--probe-allow", "10.0.0.0/33"}, nil,
			`roster: --probe-allow/--probe-deny: healthcheck: invalid config: probe allow list: "10.0.0.0/33" is not a CIDR range`},
		{[]string{"server"}, map[string]string{"ROSTER_NODE_ID": "n1", "ROSTER_DATA_DIR": "/d", "ROSTER_PROBE_DENY": "metadata"}, "probe deny list: \"metadata\" is not a CIDR range or an IP address"},
		{[]string{"dev", "--probe-deny", "127.0.0.1/x"}, nil, "probe deny list"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--dns-domain", "."}, nil, "dns-domain"},
		{[]string{"dev", "--dns-addr", "8600"}, nil, "dns-addr"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--nacos-push-max-per-addr", "-1"}, nil,
			"roster: --nacos-push-max-per-addr -1: must not be negative"},
		{[]string{"dev"}, map[string]string{"ROSTER_DNS_MAX_ANSWERS": "-1"}, "dns-max-answers"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--promote-after", "-1s"}, nil, "roster: --promote-after -1s: must not be negative"},
		{[]string{"server", "--node-id", "n1", "--data-dir", "/d", "--grpc-max-untrusted-per-ip", "0"}, nil, "roster: --grpc-max-untrusted-per-ip 0: must be positive"},
		{[]string{"dev", "--grpc-accept-rate-per-ip", "-1"}, nil, "roster: --grpc-accept-rate-per-ip -1: must be positive"},
		{[]string{"dev"}, map[string]string{"ROSTER_GRPC_MAX_UNTRUSTED": "0"}, "--grpc-max-untrusted 0: must be positive"},
	}
	for _, tc := range cases {
		a, _, stderr := newTestApp(t, tc.env)
		a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
			t.Errorf("%v: node started", tc.args)
			return "", nil, errors.New("unexpected")
		}
		if code := run(context.Background(), tc.args, a); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestServer_StartErrorExits1(t *testing.T) {
	a, _, stderr := newTestApp(t, nil)
	a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
		return "", nil, errors.New("http-addr: address already in use")
	}
	if code := run(context.Background(), []string{"server", "--node-id", "n1", "--data-dir", "/d"}, a); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if want := "roster: http-addr: address already in use\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Fatalf("stderr %q, want it to end with %q", stderr.String(), want)
	}
}

// runDev runs `roster dev` with args in the background and returns once the banner is
// printed, with a function that stops it and returns its exit code.
func runDev(t *testing.T, node *fakeNode, args ...string) (stderr *outBuffer, stop func() int) {
	t.Helper()
	a, _, errBuf := newTestApp(t, nil)
	a.startNode = node.start
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"dev"}, args...), a) }()
	t.Cleanup(cancel)
	wait.For(t, 10*time.Second, "the dev banner", func() bool {
		select {
		case code := <-done:
			t.Fatalf("dev exited %d before printing its banner: %s", code, errBuf.String())
		default:
		}
		return strings.Contains(errBuf.String(), "Press Ctrl-C to stop.")
	})
	return errBuf, func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(10 * time.Second):
			t.Fatal("dev did not stop within 10s of cancellation")
			return -1
		}
	}
}

func TestDev_TempDirReadyBannerAndCleanup(t *testing.T) {
	var sawDir bool
	node := &fakeNode{notReady: 2, onStart: func(o nodeOptions, _ *slog.Logger) {
		st, err := os.Stat(o.DataDir)
		sawDir = err == nil && st.IsDir()
	}}
	stderr, stop := runDev(t, node)
	o := node.options(t)
	if !sawDir {
		t.Fatalf("data dir %q did not exist when the node started", o.DataDir)
	}
	if o.NodeID != devNodeID || o.HTTPAddr != ":8848" || o.RaftAddr != "127.0.0.1:7848" ||
		o.RaftAdvertise != "127.0.0.1:7848" || o.Peers != "dev=127.0.0.1:7848" {
		t.Fatalf("options %+v", o)
	}
	if n := node.polls.Load(); n < 3 {
		t.Fatalf("banner printed after %d readiness polls, want it after the node turned ready (3rd poll)", n)
	}
	banner := stderr.String()
	addr := node.srv.Listener.Addr().String()
	for _, s := range []string{
		"http://" + addr,
		o.DataDir + " (removed on exit)",
		"curl -X PUT -H 'Content-Type: application/json'",
		"http://" + addr + "/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo/instances/127.0.0.1:9000",
		"curl http://" + addr + "/v1/namespaces/public/groups/DEFAULT_GROUP/services/demo/instances\n",
		"curl -X DELETE http://" + addr,
		"roster instances demo --addr " + addr,
		"dig @127.0.0.1 -p 8600 demo.svc.roster. SRV",
	} {
		if !strings.Contains(banner, s) {
			t.Errorf("banner lacks %q:\n%s", s, banner)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if node.stopCount() != 1 {
		t.Fatalf("node stopped %d times, want 1", node.stopCount())
	}
	if _, err := os.Stat(o.DataDir); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir %q still exists (err %v)", o.DataDir, err)
	}
}

func TestDev_KeepsGivenDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keep")
	node := &fakeNode{onStart: func(o nodeOptions, _ *slog.Logger) {
		if err := os.MkdirAll(o.DataDir, 0o750); err != nil {
			t.Error(err)
		}
	}}
	stderr, stop := runDev(t, node, "--data-dir", dir, "--raft-addr", ":7900", "--http-addr", "127.0.0.1:0")
	o := node.options(t)
	if o.DataDir != dir || o.RaftAdvertise != "127.0.0.1:7900" || o.Peers != "dev=127.0.0.1:7900" || o.HTTPAddr != "127.0.0.1:0" {
		t.Fatalf("options %+v", o)
	}
	if strings.Contains(stderr.String(), "removed on exit") {
		t.Fatalf("banner says a given dir is removed:\n%s", stderr.String())
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("given data dir was removed: %v", err)
	}
}

func TestDialableAddr(t *testing.T) {
	cases := map[string]string{
		":8848":            "127.0.0.1:8848",
		"0.0.0.0:8848":     "127.0.0.1:8848",
		"[::]:8848":        "127.0.0.1:8848",
		"127.100.0.1:8848": "127.100.0.1:8848",
		"[::1]:8848":       "[::1]:8848",
		"roster1:8848":     "roster1:8848",
		"not-an-address":   "not-an-address",
	}
	for in, want := range cases {
		if got := dialableAddr(in); got != want {
			t.Errorf("dialableAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDevBanner_AddrFlagOnlyOffDefault(t *testing.T) {
	if b := devBanner(defaultAddr, "/d", false); strings.Contains(b, "--addr") || !strings.Contains(b, "data in /d.") {
		t.Errorf("banner for the default address:\n%s", b)
	}
	if b := devBanner("127.0.0.1:9999", "/d", true); !strings.Contains(b, "roster register demo 127.0.0.1:9000 --addr 127.0.0.1:9999") {
		t.Errorf("banner for another address:\n%s", b)
	}
}

func TestNewLogger_Levels(t *testing.T) {
	for _, lvl := range []string{"debug", "info", "warn", "error", "INFO"} {
		if _, err := newLogger(io.Discard, lvl); err != nil {
			t.Errorf("newLogger(%q): %v", lvl, err)
		}
	}
	var buf strings.Builder
	log, err := newLogger(&buf, "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("warn logger output %q", buf.String())
	}
	if _, err := newLogger(io.Discard, "verbose"); err == nil {
		t.Fatal("newLogger accepted an unknown level")
	}
}

// --non-voter (ROSTER_NON_VOTER) reaches the server's configuration with --join, and
// is refused without it.
func TestServer_NonVoter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &fakeNode{onStart: func(nodeOptions, *slog.Logger) { cancel() }}
	a, _, stderr := newTestApp(t, map[string]string{"ROSTER_NON_VOTER": "true"})
	a.startNode = node.start
	if code := run(ctx, []string{"server", "--node-id", "n4", "--data-dir", "/d", "--join", "127.0.0.1:8848"}, a); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	o := node.options(t)
	if !o.NonVoter {
		t.Fatalf("options %+v: want NonVoter", o)
	}
	cfg, err := serverConfig(o, slog.New(slog.DiscardHandler))
	if err != nil || !cfg.NonVoter || cfg.Join != "127.0.0.1:8848" {
		t.Fatalf("server config NonVoter=%v Join=%q (%v)", cfg.NonVoter, cfg.Join, err)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"server", "--node-id", "n4", "--data-dir", "/d", "--non-voter"}, nil},
		{[]string{"server", "--node-id", "n4", "--data-dir", "/d", "--peers", "n4=127.0.0.1:7848"}, map[string]string{"ROSTER_NON_VOTER": "1"}},
	} {
		a, _, stderr := newTestApp(t, tc.env)
		a.startNode = func(nodeOptions, *slog.Logger) (string, func() error, error) {
			t.Errorf("%v: node started", tc.args)
			return "", nil, errors.New("unexpected")
		}
		code := run(context.Background(), tc.args, a)
		if code != exitUsage || !strings.Contains(stderr.String(), "--non-voter applies only to a node that joins: give --join") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr.String())
		}
	}
}

func TestNodeOptions_ReadCacheSize(t *testing.T) {
	for _, c := range []struct{ flag, want int64 }{{0, -1}, {-5, -1}, {1 << 20, 1 << 20}} {
		if got := (nodeOptions{ReadCacheSize: c.flag}).readCacheSize(); got != c.want {
			t.Errorf("--read-cache-size %d: server ReadCacheSize %d, want %d", c.flag, got, c.want)
		}
	}
}

// The push bounds and --refuse-confusable-names reach the server's configuration.
func TestServerConfig_PushBoundsAndConfusableNames(t *testing.T) {
	o := nodeOptions{NodeID: "n1", DataDir: "/d", RefuseConfusableNames: true,
		NacosPush: server.NacosPushLimits{MaxPerAddr: 9, MaxPerPort: 3, ChangeBudget: 1000}}
	cfg, err := serverConfig(o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RefuseConfusableNames || cfg.NacosPush != o.NacosPush {
		t.Fatalf("server config RefuseConfusableNames=%v NacosPush=%+v", cfg.RefuseConfusableNames, cfg.NacosPush)
	}
}
