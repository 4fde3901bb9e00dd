//go:build linux

package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rosterhq/roster/client"
)

// BuildBinary builds cmd/roster (without the race detector, whatever the test binary
// uses) into dir and returns its path, its version and commit stamped as release
// builds stamp them (git describe of the checkout; "dev" without git). modDir is the
// module root.
func BuildBinary(ctx context.Context, modDir, dir string) (string, error) {
	bin := filepath.Join(dir, "roster")
	version, commit := "dev", ""
	if out, err := exec.CommandContext(ctx, "git", "-C", modDir, "describe", "--tags", "--match", "v*", "--always", "--dirty").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", modDir, "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	// `go test` puts its own Go first on PATH.
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags",
		"-X github.com/rosterhq/roster/buildinfo.version="+version+" -X github.com/rosterhq/roster/buildinfo.commit="+commit,
		"-o", bin, "./cmd/roster")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/roster: %v\n%s", err, out)
	}
	return bin, nil
}

// ClusterConfig describes a cluster to start.
type ClusterConfig struct {
	// Binary is the roster binary.
	Binary string
	// Dir holds each node's data directory and log file.
	Dir string
	// Nodes is the number of nodes (3 or 5).
	Nodes int
	// DiskBytes, when positive, gives each node a file system of its own of that size
	// (a tmpfs mounted on Dir/<node>, which needs root) holding its data directory, so
	// that a fault can fill it.
	DiskBytes int64
	// PromoteAfter is the nodes' --promote-after (0: the server's default).
	PromoteAfter time.Duration
	// Args are extra command-line arguments of each node, by node id ("n1"...), for
	// tests that give nodes different flags.
	Args map[string][]string
	// Logf receives the harness's own events.
	Logf func(format string, args ...any)
}

// Cluster is a set of roster server processes on loopback whose Raft and HTTP
// advertise addresses are proxies on Net.
type Cluster struct {
	cfg   ClusterConfig
	Net   *Network
	Nodes []*Node
	logf  func(format string, args ...any)

	hcOnce sync.Once
	hc     *http.Client
}

// HeaderOpID carries a workload operation's id on its request; Roster forwards it
// with the request, so the HTTP proxies can tell which operations they delivered.
const HeaderOpID = "X-Roster-Test-Op"

type opIDKey struct{}

// withOpID tags the requests made with ctx with a workload operation id.
func withOpID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDKey{}, id)
}

// opTagger sets HeaderOpID from the request's context.
type opTagger struct{ base http.RoundTripper }

func (t opTagger) RoundTrip(r *http.Request) (*http.Response, error) {
	if id, ok := r.Context().Value(opIDKey{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set(HeaderOpID, id)
	}
	return t.base.RoundTrip(r)
}

// httpClient is the HTTP client every node's API client shares.
func (c *Cluster) httpClient() *http.Client {
	c.hcOnce.Do(func() {
		c.hc = &http.Client{Transport: opTagger{base: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     30 * time.Second,
		}}}
	})
	return c.hc
}

// Node is one roster server process; it keeps its id, data directory, log file and
// proxies across restarts. Its real listen ports change at every start.
type Node struct {
	ID      string
	DataDir string
	LogPath string

	raft *raftProxy
	http *httpProxy
	// disk is the tmpfs mount holding DataDir ("" without ClusterConfig.DiskBytes).
	disk string
	// joinVia, when set, makes the next starts join the cluster through that HTTP
	// address instead of bootstrapping from the peer list (the node was removed and
	// its data wiped).
	joinVia string

	mu sync.Mutex
	// binary is the roster binary the node's next start runs ("" : the cluster's).
	binary   string
	cmd      *exec.Cmd
	exited   chan struct{}
	httpAddr string // real API address, "" while down
	raftAddr string // real Raft address, "" while down
	grpcAddr string // real Nacos gRPC address, "" while down
	paused   bool
	client   *client.Client
	starts   int
}

// StartCluster starts every node of a new cluster (bootstrapped from the same peer
// list on every node) and its proxies. It does not wait for a leader.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Cluster{cfg: cfg, Net: NewNetwork(), logf: cfg.Logf}
	for i := 1; i <= cfg.Nodes; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i)}
		n.DataDir = filepath.Join(cfg.Dir, n.ID, "data")
		n.LogPath = filepath.Join(cfg.Dir, n.ID+".log")
		c.Nodes = append(c.Nodes, n)
		err := os.MkdirAll(filepath.Dir(n.DataDir), 0o755)
		if err == nil && cfg.DiskBytes > 0 {
			if err = mountDisk(filepath.Dir(n.DataDir), cfg.DiskBytes); err == nil {
				n.disk = filepath.Dir(n.DataDir)
			}
		}
		if err == nil {
			err = os.MkdirAll(n.DataDir, 0o755)
		}
		if err == nil {
			n.raft, err = newRaftProxy(n.ID, c.Net, n.upstreamRaft)
		}
		if err == nil {
			n.http, err = newHTTPProxy(n.ID, c.Net, n.upstreamHTTP)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (n *Node) upstreamRaft() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.raftAddr
}

func (n *Node) upstreamHTTP() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.httpAddr
}

// Client returns a client for the node's API (with ClientTimeout), or nil while the
// node is down.
func (n *Node) Client() *client.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

// Running reports whether the node's process is up (paused or not).
// GRPCAddr is the node's Nacos gRPC address ("" while down).
func (n *Node) GRPCAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.grpcAddr
}

func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Paused reports whether the node is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

func (c *Cluster) peers() string {
	parts := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		parts[i] = n.ID + "=" + n.raft.Addr()
	}
	return strings.Join(parts, ",")
}

// freePort reserves a loopback port by listening on port 0 and closing the listener.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// ClientTimeout bounds every workload request: short, so that a partition or a paused
// node turns into an unknown outcome quickly.
const ClientTimeout = 2 * time.Second

// Start starts the node's process (which must be down) on fresh ports and returns once
// its API accepts connections. A port taken between reservation and use is retried.
func (c *Cluster) Start(n *Node) error {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if last = c.startOnce(n); last == nil {
			return nil
		}
		c.logf("start %s failed (attempt %d): %v", n.ID, attempt+1, last)
	}
	return last
}

func (c *Cluster) startOnce(n *Node) error {
	httpAddr, err := freePort()
	if err != nil {
		return err
	}
	raftAddr, err := freePort()
	if err != nil {
		return err
	}
	// The Nacos gRPC API gets a port of its own: its default, the HTTP port + 1000,
	// may be the Raft port just drawn.
	grpcAddr, err := freePort()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		_ = logf.Close()
		return fmt.Errorf("%s is already running", n.ID)
	}
	n.starts++
	bin := n.binary
	if bin == "" {
		bin = c.cfg.Binary
	}
	fmt.Fprintf(logf, "==== harness: start %d of %s at %s (http %s, raft %s, binary %s)\n", n.starts, n.ID, time.Now().Format(time.RFC3339Nano), httpAddr, raftAddr, bin)
	flags, err := serverFlags(bin)
	if err != nil {
		n.mu.Unlock()
		_ = logf.Close()
		return err
	}
	args := []string{"server",
		"--node-id", n.ID,
		"--data-dir", n.DataDir,
		"--http-addr", httpAddr,
		"--http-advertise", n.http.Addr(),
		"--raft-addr", raftAddr,
		"--raft-advertise", n.raft.Addr(),
		"--log-level", "info",
	}
	// Flags of later releases, for binaries that know them (an older release runs beside
	// the current one in upgrade tests).
	for _, f := range [][2]string{{"--grpc-addr", grpcAddr}, {"--probe-allow", "127.0.0.0/8,::1/128"}} {
		if flags[f[0]] {
			args = append(args, f[0], f[1])
		}
	}
	if n.joinVia != "" {
		args = append(args, "--join", n.joinVia)
	} else {
		args = append(args, "--peers", c.peers())
	}
	if c.cfg.PromoteAfter > 0 && flags["--promote-after"] {
		args = append(args, "--promote-after", c.cfg.PromoteAfter.String())
	}
	args = append(args, c.cfg.Args[n.ID]...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		_ = logf.Close()
		return err
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.grpcAddr = grpcAddr
	n.httpAddr, n.raftAddr = httpAddr, raftAddr
	n.client = client.New(httpAddr, client.WithTimeout(ClientTimeout), client.WithHTTPClient(c.httpClient()))
	n.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()

	// Wait until the API answers HTTP (or the process dies, e.g. on a port clash). A
	// bare TCP connect is not enough: the port reserved for this API may have gone to
	// another node's listener in between (a gRPC port answers HTTP/2), and this node
	// then exits on its clash while the harness takes the other listener for its API.
	probe := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			c.reap(n, cmd)
			return fmt.Errorf("%s exited during start (see %s)", n.ID, n.LogPath)
		default:
		}
		resp, err := probe.Get("http://" + httpAddr + "/v1/status/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.Header.Get("X-Roster-Served-By") == n.ID {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Kill(n)
	return fmt.Errorf("%s did not open its API within 15s (see %s)", n.ID, n.LogPath)
}

// SetBinary makes n's next starts run bin ("": the cluster's binary), as an operator
// replaces a node's binary during a rolling upgrade or a rollback.
func (c *Cluster) SetBinary(n *Node, bin string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.binary = bin
}

// Binary is the binary n's next start runs.
func (c *Cluster) Binary(n *Node) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.binary == "" {
		return c.cfg.Binary
	}
	return n.binary
}

var (
	flagsMu    sync.Mutex
	flagsOfBin = map[string]map[string]bool{}
)

// serverFlags lists the flags `bin server` accepts, from its help.
func serverFlags(bin string) (map[string]bool, error) {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flagsOfBin[bin]; ok {
		return f, nil
	}
	out, err := exec.Command(bin, "server", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s server --help: %v\n%s", bin, err, out)
	}
	f := map[string]bool{}
	for _, w := range strings.Fields(string(out)) {
		if strings.HasPrefix(w, "--") {
			f[strings.TrimRight(w, ",=")] = true
		}
	}
	flagsOfBin[bin] = f
	return f, nil
}

// reap forgets a process that exited.
func (c *Cluster) reap(n *Node, cmd *exec.Cmd) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == cmd {
		n.cmd, n.httpAddr, n.raftAddr, n.client, n.paused = nil, "", "", nil, false
	}
}

// Kill sends SIGKILL to the node's process group and waits until it is gone.
func (c *Cluster) Kill(n *Node) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.logf("%s: process %d did not exit 10s after SIGKILL", n.ID, cmd.Process.Pid)
	}
	c.reap(n, cmd)
}

// Stop sends SIGTERM to the node's process, as an orchestrator stopping it would, and
// waits until it has exited (a clean shutdown: a leader hands leadership over first).
// A process still running after limit is killed, and that is an error.
func (c *Cluster) Stop(n *Node, limit time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s: %w", n.ID, errNotRunning)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: SIGTERM: %w", n.ID, err)
	}
	select {
	case <-exited:
		c.reap(n, cmd)
		return nil
	case <-time.After(limit):
		c.Kill(n)
		return fmt.Errorf("%s did not exit within %s of SIGTERM (killed; see %s)", n.ID, limit, n.LogPath)
	}
}

// DumpStacks makes every running node print the stacks of all its goroutines into its
// log and exit (SIGQUIT; the nodes run with GOTRACEBACK=all), continuing paused ones
// first.
func (c *Cluster) DumpStacks() {
	for _, n := range c.Nodes {
		n.mu.Lock()
		cmd, exited, paused := n.cmd, n.exited, n.paused
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		if paused {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
		}
		if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			continue
		}
		select {
		case <-exited:
			c.reap(n, cmd)
		case <-time.After(5 * time.Second):
			c.logf("%s: no exit 5s after SIGQUIT", n.ID)
		}
	}
}

// Pause stops the node's process group with SIGSTOP.
func (c *Cluster) Pause(n *Node) error {
	return c.signal(n, syscall.SIGSTOP, true)
}

// Resume continues a paused node with SIGCONT.
func (c *Cluster) Resume(n *Node) error {
	return c.signal(n, syscall.SIGCONT, false)
}

func (c *Cluster) signal(n *Node, sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s: %w", n.ID, errNotRunning)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("%s: %v: %w", n.ID, sig, err)
	}
	n.paused = paused
	return nil
}

// Close kills every process (continuing paused ones first) and closes the proxies. A
// node's own file system is unmounted, its data directory copied out first (so that
// CopyData still finds it).
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.cmd != nil && n.paused {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGCONT)
		}
		n.mu.Unlock()
		c.Kill(n)
	}
	c.Net.closeAll()
	if c.hc != nil {
		c.hc.CloseIdleConnections()
	}
	for _, n := range c.Nodes {
		if n.raft != nil {
			n.raft.close()
		}
		if n.http != nil {
			n.http.close()
		}
		if n.disk != "" {
			if err := unmountDisk(n.disk, n.DataDir); err != nil {
				c.logf("%s: %v", n.ID, err)
			}
			n.disk = ""
		}
	}
}

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// IDs returns the node ids.
func (c *Cluster) IDs() []string {
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// errUnhealthy is returned by WaitHealthy when the deadline passes.
var errUnhealthy = errors.New("cluster did not become healthy")

// WaitHealthy polls until every running, unpaused node reports ready with the same
// leader, which is one of them, and returns that leader.
func (c *Cluster) WaitHealthy(ctx context.Context, limit time.Duration) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var why string
	for {
		leader, reason := c.healthy(ctx)
		if leader != nil {
			return leader, nil
		}
		why = reason
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w within %s: %s", errUnhealthy, limit, why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) (*Node, string) {
	var leaderID string
	up := 0
	for _, n := range c.Nodes {
		cl := n.Client()
		if cl == nil || n.Paused() {
			continue
		}
		up++
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := cl.Ready(rctx)
		cancel()
		switch {
		case err != nil:
			return nil, fmt.Sprintf("%s: %v", n.ID, err)
		case !r.Ready:
			return nil, fmt.Sprintf("%s not ready: %s", n.ID, r.Reason)
		case leaderID == "":
			leaderID = r.Leader
		case leaderID != r.Leader:
			return nil, fmt.Sprintf("leaders differ: %s and %s", leaderID, r.Leader)
		}
	}
	if up == 0 {
		return nil, "no node is running"
	}
	l := c.Node(leaderID)
	if l == nil || !l.Running() || l.Paused() {
		return nil, fmt.Sprintf("leader %q is not a running node", leaderID)
	}
	return l, ""
}

// Leader returns the node every running node names as leader, waiting for one.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	return c.WaitHealthy(ctx, 20*time.Second)
}

// CopyLogs copies every node's log file into dir.
func (c *Cluster) CopyLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := copyFile(n.LogPath, filepath.Join(dir, filepath.Base(n.LogPath))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// CopyData copies every node's data directory (state.db, the Raft log and snapshots)
// into dir/<node>/. The nodes should be stopped.
func (c *Cluster) CopyData(dir string) error {
	for _, n := range c.Nodes {
		err := filepath.WalkDir(n.DataDir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(n.DataDir, path)
			if err != nil {
				return err
			}
			dst := filepath.Join(dir, n.ID, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			return copyFile(path, dst)
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// procAttr puts a node in its own process group (so SIGKILL and SIGSTOP reach all of
// it) and kills it if the harness dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// CoalescedWrites sums, over the running nodes, the writes their registries proposed in
// entries shared with other writes (roster_registry_entry_commands: sum minus count).
// A node that cannot be scraped counts nothing.
func (c *Cluster) CoalescedWrites(ctx context.Context) int {
	hc := &http.Client{Timeout: 2 * time.Second}
	total := 0
	for _, n := range c.Nodes {
		addr := n.upstreamHTTP()
		if addr == "" || n.Paused() {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		var sum, count float64
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			name, value, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			switch name {
			case "roster_registry_entry_commands_sum":
				sum, _ = strconv.ParseFloat(value, 64)
			case "roster_registry_entry_commands_count":
				count, _ = strconv.ParseFloat(value, 64)
			}
		}
		_ = resp.Body.Close()
		total += int(sum - count)
	}
	return total
}
