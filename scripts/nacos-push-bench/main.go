// Command nacos-push-bench measures how soon the real nacos-sdk-go v1 client learns of
// a deregistration through Roster's Nacos API: from the start of the DELETE until the
// SDK's subscribe callback reports the shorter instance list (the SDK updates its cache
// just before it calls back).
//
// It starts a 3-node cluster in this process, on loopback with ports the system picks
// and the production fsync settings, registers two persistent instances of a service
// in a NONE-checked cluster, and subscribes two SDK clients through the same node
// (-via follower or leader):
//
//   - push: the SDK as it runs. It offers its UDP port, Roster records it and pushes.
//   - poll: the same SDK behind a proxy that drops udpPort from its queries, so Roster
//     answers cacheMillis 1000 and never pushes to it: what the SDK sees without pushes.
//
// Each trial waits a random 0..-jitter, deregisters the second instance through the
// leader, times both clients' callbacks, and registers the instance again (waiting for
// both clients to see it). Every address is on 127.0.0.1.
//
//	go run ./scripts/nacos-push-bench -trials 100 -via follower
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/clients/nacos_client"
	"github.com/nacos-group/nacos-sdk-go/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/common/constant"
	"github.com/nacos-group/nacos-sdk-go/common/http_agent"
	nmodel "github.com/nacos-group/nacos-sdk-go/model"
	"github.com/nacos-group/nacos-sdk-go/vo"

	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
)

func main() {
	var (
		trials = flag.Int("trials", 100, "measured deregistrations")
		warmup = flag.Int("warmup", 3, "deregistrations before measuring")
		via    = flag.String("via", "follower", "node the SDK clients talk to: follower or leader")
		jitter = flag.Duration("jitter", time.Second, "random wait before each deregistration, so that it falls anywhere in the SDK's 1 s poll loop")
		keep   = flag.Bool("keep", false, "keep the data directory")
	)
	flag.Parse()
	if *via != "follower" && *via != "leader" {
		fmt.Fprintln(os.Stderr, "nacos-push-bench: -via must be follower or leader")
		os.Exit(2)
	}
	if err := run(*trials, *warmup, *via, *jitter, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-push-bench:", err)
		os.Exit(1)
	}
}

const (
	service  = "bench"
	keptPort = 20001 // the instance that stays
	movePort = 20002 // the instance deregistered and registered again
)

func run(trials, warmup int, via string, jitter time.Duration, keep bool) error {
	dir, err := os.MkdirTemp("", "nacos-push-bench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	nodes, err := startCluster(filepath.Join(dir, "cluster"), 3)
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	leader, err := waitLeader(nodes, 30*time.Second)
	if err != nil {
		return err
	}
	target := nodes[leader]
	if via == "follower" {
		target = nodes[(leader+1)%len(nodes)]
	}
	leaderURL := "http://" + nodes[leader].HTTPAddr()
	if err := setup(leaderURL); err != nil {
		return err
	}

	proxy, err := startProxy(target.HTTPAddr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	pushObs, pushAgent, err := subscribe(target.HTTPAddr(), filepath.Join(dir, "sdk-push"))
	if err != nil {
		return err
	}
	pollObs, pollAgent, err := subscribe(proxy.Addr().String(), filepath.Join(dir, "sdk-poll"))
	if err != nil {
		return err
	}
	for _, o := range []*observer{pushObs, pollObs} {
		if _, err := o.waitFor(2, time.Time{}, 30*time.Second); err != nil {
			return fmt.Errorf("first callback: %w", err)
		}
	}

	fmt.Printf("machine: %s\n", machine())
	fmt.Printf("cluster: 3 nodes in one process on 127.0.0.1; SDK clients subscribed through the %s %s\n", via, target.Node().ID())
	fmt.Printf("trials: %d after %d warm-up, each after a random 0..%s wait\n", trials, warmup, jitter)
	pushMetrics := []string{"roster_nacos_push_sent_total", "roster_nacos_push_acked_total", "roster_nacos_push_resent_total",
		"roster_nacos_push_superseded_total", "roster_nacos_push_failed_total"}
	before := metrics(target.HTTPAddr())
	pushLists, pollLists := pushAgent.lists.Load(), pollAgent.lists.Load()

	var (
		writes, push, poll []time.Duration
		retried            int
	)
	// write sends a write to the leader, again (to the new leader) when leadership moved
	// meanwhile; both writes are idempotent. It reports whether it had to retry.
	write := func(method string) (bool, error) {
		err := nacos(method, leaderURL+"/nacos/v1/ns/instance", instanceForm(movePort))
		tries := 0
		for ; err != nil && tries < 5; tries++ {
			if leader, err = waitLeader(nodes, 30*time.Second); err != nil {
				return true, err
			}
			leaderURL = "http://" + nodes[leader].HTTPAddr()
			err = nacos(method, leaderURL+"/nacos/v1/ns/instance", instanceForm(movePort))
		}
		return tries > 0, err
	}
	for i := range warmup + trials {
		time.Sleep(rand.N(jitter + 1))
		t0 := time.Now()
		again, err := write(http.MethodDelete)
		if err != nil {
			return err
		}
		wrote := time.Since(t0)
		pushAt, err := pushObs.waitFor(1, t0, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d, push client: %w", i, err)
		}
		pollAt, err := pollObs.waitFor(1, t0, 30*time.Second)
		if err != nil {
			return fmt.Errorf("trial %d, poll client: %w", i, err)
		}
		switch {
		case i < warmup:
		case again:
			retried++ // a leader election is not what this measures
		default:
			writes = append(writes, wrote)
			push = append(push, pushAt.Sub(t0))
			poll = append(poll, pollAt.Sub(t0))
		}
		t1 := time.Now()
		if _, err := write(http.MethodPost); err != nil {
			return err
		}
		for _, o := range []*observer{pushObs, pollObs} {
			if _, err := o.waitFor(2, t1, 30*time.Second); err != nil {
				return fmt.Errorf("trial %d, re-registration: %w", i, err)
			}
		}
	}
	after := metrics(target.HTTPAddr())

	fmt.Printf("\n%-44s %5s %9s %9s %9s %9s %9s\n", "deregistration → SDK callback", "n", "p50", "p90", "p99", "max", "mean")
	row("DELETE answered (the write alone)", writes)
	row("push: nacos-sdk-go v1 as it runs", push)
	row("poll only: udpPort dropped (cacheMillis 1000)", poll)
	fmt.Printf("\nover the run (%d deregistrations and %d registrations), on the %s:\n", warmup+trials, warmup+trials, via)
	for _, m := range pushMetrics {
		fmt.Printf("  %-40s %6.0f\n", m, sum(after, m, "")-sum(before, m, ""))
	}
	if retried > 0 {
		fmt.Printf("left out: %d trials whose deregistration met a leader change\n", retried)
	}
	fmt.Printf("instance-list queries sent: push client %d, poll client %d\n",
		pushAgent.lists.Load()-pushLists, pollAgent.lists.Load()-pollLists)
	return nil
}

// startCluster starts n nodes bootstrapped together, each with its own data directory.
func startCluster(dir string, n int) ([]*server.Server, error) {
	var (
		peers []raftnode.Peer
		lns   []net.Listener
	)
	for i := 1; i <= n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		peers = append(peers, raftnode.Peer{ID: "n" + strconv.Itoa(i), Addr: ln.Addr().String()})
	}
	var nodes []*server.Server
	for i, ln := range lns {
		s, err := server.New(server.Config{
			NodeID: peers[i].ID, DataDir: filepath.Join(dir, peers[i].ID), HTTPAddr: "127.0.0.1:0",
			RaftAddr: peers[i].Addr, RaftListener: ln, Peers: peers, Logger: slog.New(slog.DiscardHandler),
		})
		if err == nil {
			err = s.Start()
		}
		if err != nil {
			for _, started := range nodes {
				_ = started.Close()
			}
			return nil, fmt.Errorf("node %s: %w", peers[i].ID, err)
		}
		nodes = append(nodes, s)
	}
	return nodes, nil
}

// waitLeader waits until one node leads and every node knows its HTTP address.
func waitLeader(nodes []*server.Server, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, s := range nodes {
			if !s.Node().IsLeader() {
				continue
			}
			all := true
			for _, o := range nodes {
				m, ok := o.Node().Leader()
				ready, _ := o.Node().Ready()
				all = all && ok && m.HTTPAddr != "" && ready
			}
			if all {
				return i, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1, errors.New("no leader known to every node")
}

func instanceForm(port int) string {
	return "serviceName=" + service + "&ip=127.0.0.1&ephemeral=false&port=" + strconv.Itoa(port)
}

// setup creates the service, makes its default cluster NONE-checked (no probes) and
// registers both instances.
func setup(base string) error {
	steps := [][2]string{
		{http.MethodPost, "/nacos/v1/ns/service?serviceName=" + service},
		{http.MethodPut, "/nacos/v1/ns/cluster?serviceName=" + service + "&clusterName=DEFAULT&healthChecker=" + url.QueryEscape(`{"type":"NONE"}`)},
		{http.MethodPost, "/nacos/v1/ns/instance?" + instanceForm(keptPort)},
		{http.MethodPost, "/nacos/v1/ns/instance?" + instanceForm(movePort)},
	}
	for _, s := range steps {
		if err := nacos(s[0], base+s[1], ""); err != nil {
			return err
		}
	}
	return nil
}

// nacos sends one Nacos request and expects "ok".
func nacos(method, target, form string) error {
	req, err := http.NewRequest(method, target, strings.NewReader(form))
	if err != nil {
		return err
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		return fmt.Errorf("%s %s: %d %s", method, target, resp.StatusCode, b)
	}
	return nil
}

// startProxy serves a reverse proxy to node that drops udpPort from every query: the
// client then asks for no pushes.
func startProxy(node string) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	target := &url.URL{Scheme: "http", Host: node}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		q := pr.Out.URL.Query()
		q.Del("udpPort")
		pr.Out.URL.RawQuery = q.Encode()
	}}
	go func() { _ = http.Serve(ln, rp) }()
	return ln, nil
}

// observer follows one SDK client's callbacks.
type observer struct {
	mu    sync.Mutex
	hosts int
	at    time.Time
	ch    chan struct{}
}

func (o *observer) callback(services []nmodel.SubscribeService, err error) {
	n := len(services)
	if err != nil {
		n = 0
	}
	now := time.Now()
	o.mu.Lock()
	o.hosts, o.at = n, now
	o.mu.Unlock()
	select {
	case o.ch <- struct{}{}:
	default:
	}
}

// waitFor returns the time of the first callback at or after since that reported n hosts.
func (o *observer) waitFor(n int, since time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		o.mu.Lock()
		hosts, at := o.hosts, o.at
		o.mu.Unlock()
		if hosts == n && !at.Before(since) {
			return at, nil
		}
		select {
		case <-o.ch:
		case <-deadline:
			return time.Time{}, fmt.Errorf("no callback with %d hosts within %s (last: %d)", n, timeout, hosts)
		}
	}
}

// countingAgent is the SDK's HTTP agent, counting the instance-list queries it sends.
type countingAgent struct {
	http_agent.HttpAgent
	lists atomic.Int64
}

func (a *countingAgent) Request(method, path string, header http.Header, timeoutMs uint64, params map[string]string) (*http.Response, error) {
	if strings.HasSuffix(path, "/instance/list") {
		a.lists.Add(1)
	}
	return a.HttpAgent.Request(method, path, header, timeoutMs, params)
}

// subscribe creates an SDK naming client for addr and subscribes it to the service.
func subscribe(addr, dir string) (*observer, *countingAgent, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	port, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return nil, nil, err
	}
	nc := &nacos_client.NacosClient{}
	agent := &countingAgent{}
	if err := errors.Join(
		nc.SetClientConfig(constant.ClientConfig{
			TimeoutMs: 5000, NotLoadCacheAtStart: true, LogLevel: "error",
			CacheDir: filepath.Join(dir, "cache"), LogDir: filepath.Join(dir, "log"),
		}),
		nc.SetServerConfig([]constant.ServerConfig{{IpAddr: host, Port: port, ContextPath: "/nacos"}}),
		nc.SetHttpAgent(agent),
	); err != nil {
		return nil, nil, err
	}
	client, err := naming_client.NewNamingClient(nc)
	if err != nil {
		return nil, nil, err
	}
	o := &observer{ch: make(chan struct{}, 1)}
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: service, SubscribeCallback: o.callback}); err != nil {
		return nil, nil, err
	}
	return o, agent, nil
}

// row prints the percentiles of ds (nearest rank).
func row(name string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	f := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("%-44s %5d %9s %9s %9s %9s %9s\n", name, len(s), f(pct(0.5)), f(pct(0.9)), f(pct(0.99)), f(s[len(s)-1]),
		f(sum/time.Duration(len(s))))
}

// metrics reads a node's /metrics text ("" when it cannot).
func metrics(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// sum adds up the samples of metric name in text whose labels contain label.
func sum(text, name, label string) float64 {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// machine describes this machine as the benchmark docs do.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = "; load average " + strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%d CPUs, %s, %s%s", runtime.NumCPU(), model, runtime.Version(), load)
}
