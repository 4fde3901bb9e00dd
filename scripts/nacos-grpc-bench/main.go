// Command nacos-grpc-bench measures how soon real nacos-sdk-go v2 clients learn of a
// change through Roster's Nacos gRPC API: from the start of a write until each client's
// subscribe callback reports the new instance list (the SDK updates its cache just before
// it calls back), with 1, 100 and 1,000 clients subscribed at once, and what each
// connection costs the node in memory.
//
// It starts a 3-node Roster cluster as separate processes (a roster binary built from
// ./cmd/roster, or -roster-bin), on 127.0.0.1 with ports the system picks and the
// production fsync settings, creates a service with a NONE-checked cluster and two
// persistent instances, and for each client count connects that many SDK clients (each its
// own gRPC connection) to one follower and subscribes them all. The node's RSS is read
// before the clients connect and once they are all subscribed and idle. Each trial waits
// a random 0..-jitter, deregisters the second instance through the leader, waits until
// every client has called back with the shorter list, then registers it again and waits
// for that too; both changes are measured. Every address is on 127.0.0.1.
//
//	go run ./scripts/nacos-grpc-bench -clients 1,100,1000 -trials 30
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/internal/procstat"
)

func main() {
	var (
		counts  = flag.String("clients", "1,100,1000", "comma-separated numbers of subscribed clients")
		trials  = flag.Int("trials", 30, "measured deregistration+registration pairs per client count")
		warmup  = flag.Int("warmup", 2, "pairs before measuring")
		jitter  = flag.Duration("jitter", 100*time.Millisecond, "random wait before each write")
		bin     = flag.String("roster-bin", "", "roster binary (default: built from ./cmd/roster)")
		out     = flag.String("out", "", "write the results as JSON to this file")
		keep    = flag.Bool("keep", false, "keep the working directory")
		onLeadr = flag.Bool("on-leader", false, "connect the clients to the leader instead of a follower")
		prof    = flag.String("cpuprofile", "", "write a CPU profile of the node the clients use, taken during the measured changes of the last client count, to this file")
	)
	flag.Parse()
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "nacos-grpc-bench: -clients %q: want positive numbers\n", *counts)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	cpuProfile = *prof
	if err := run(ns, *trials, *warmup, *jitter, *bin, *out, *keep, *onLeadr); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-grpc-bench:", err)
		os.Exit(1)
	}
}

// cpuProfile is -cpuprofile.
var cpuProfile string

const (
	service  = "bench"
	keptPort = 20001 // the instance that stays
	movePort = 20002 // the instance deregistered and registered again
)

// result is one client count's measurements.
type result struct {
	Clients        int     `json:"clients"`
	Via            string  `json:"via"`
	Changes        int     `json:"changes"`
	Callbacks      int     `json:"callbacks"`
	Missing        int     `json:"missing"`
	WriteP50Ms     float64 `json:"write_p50_ms"`
	CallbackP50Ms  float64 `json:"callback_p50_ms"`
	CallbackP90Ms  float64 `json:"callback_p90_ms"`
	CallbackP99Ms  float64 `json:"callback_p99_ms"`
	CallbackMaxMs  float64 `json:"callback_max_ms"`
	LastP50Ms      float64 `json:"last_client_p50_ms"`
	LastMaxMs      float64 `json:"last_client_max_ms"`
	SubscribeS     float64 `json:"subscribe_all_s"`
	RSSBeforeKiB   int64   `json:"node_rss_before_kib"`
	RSSIdleKiB     int64   `json:"node_rss_idle_kib"`
	PerConnKiB     float64 `json:"node_rss_per_connection_kib"`
	NodeGoroutines float64 `json:"node_goroutines_idle"`
	Pushes         float64 `json:"node_pushes_acked"`
	// CPU over the measured changes, in milliseconds per change: the node the clients
	// connect to, and this process (the SDK clients).
	NodeCPUMsPerChange  float64 `json:"node_cpu_ms_per_change"`
	BenchCPUMsPerChange float64 `json:"clients_cpu_ms_per_change"`
}

func run(counts []int, trials, warmup int, jitter time.Duration, bin, out string, keep, onLeader bool) error {
	dir, err := os.MkdirTemp("", "nacos-grpc-bench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	if bin == "" {
		bin = filepath.Join(dir, "roster")
		fmt.Fprintln(os.Stderr, "building roster")
		if b, err := exec.Command("go", "build", "-o", bin, "./cmd/roster").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, b)
		}
	}
	c, err := startCluster(bin, dir)
	if err != nil {
		return err
	}
	defer c.stop()
	leader, err := c.waitLeader(60 * time.Second)
	if err != nil {
		return err
	}
	target := (leader + 1) % 3
	via := "follower"
	if onLeader {
		target, via = leader, "leader"
	}
	lead, node := c.nodes[leader], c.nodes[target]
	if err := setup(lead.http); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "clients on n%d (%s, the %s, pid %d); leader n%d\n", target+1, node.grpc, via, node.cmd.Process.Pid, leader+1)

	var results []result
	for _, n := range counts {
		r, err := measure(dir, lead, node, via, n, trials, warmup, jitter)
		if err != nil {
			return fmt.Errorf("%d clients: %w", n, err)
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%d clients: callback p50 %.1f ms, p99 %.1f ms\n", n, r.CallbackP50Ms, r.CallbackP99Ms)
	}
	fmt.Printf("nacos-sdk-go v2.3.2 clients subscribed to %s through one node (%s); change = deregister or register one of 2 instances through the leader\n", service, via)
	fmt.Printf("latency from the start of the write to each client's subscribe callback, ms; RSS of the node the clients connect to\n\n")
	fmt.Printf("%8s %8s %10s %8s %8s %8s %8s %8s %10s %10s %12s %12s %10s %14s %14s\n", "clients", "changes", "callbacks", "write", "p50", "p90", "p99", "max",
		"last p50", "last max", "rss idle MiB", "KiB per conn", "goroutines", "node cpu ms/ch", "sdk cpu ms/ch")
	for _, r := range results {
		fmt.Printf("%8d %8d %10d %8.2f %8.2f %8.2f %8.2f %8.2f %10.2f %10.2f %12.1f %12.1f %10.0f %14.1f %14.1f\n", r.Clients, r.Changes, r.Callbacks,
			r.WriteP50Ms, r.CallbackP50Ms, r.CallbackP90Ms, r.CallbackP99Ms, r.CallbackMaxMs, r.LastP50Ms, r.LastMaxMs,
			float64(r.RSSIdleKiB)/1024, r.PerConnKiB, r.NodeGoroutines, r.NodeCPUMsPerChange, r.BenchCPUMsPerChange)
	}
	fmt.Printf("\nmachine: %d cores; %s\n", runtime.NumCPU(), runtime.Version())
	if out != "" {
		b, err := json.MarshalIndent(map[string]any{"tool": "nacos-grpc-bench", "cores": runtime.NumCPU(), "go": runtime.Version(), "results": results}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	}
	return nil
}

// observer records a client's latest list and signals every callback.
type observer struct {
	mu    sync.Mutex
	has   bool // the moving instance is in the latest list
	seen  bool // any callback at all
	at    time.Time
	moved chan struct{}
}

func (o *observer) callback(list []model.Instance, err error) {
	if err != nil {
		return
	}
	has := slices.ContainsFunc(list, func(in model.Instance) bool { return in.Port == movePort })
	now := time.Now()
	o.mu.Lock()
	o.has, o.seen, o.at = has, true, now
	ch := o.moved
	o.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// waitFor waits until the client's list has (or lacks) the moving instance and returns
// when it first saw it.
func (o *observer) waitFor(has bool, deadline time.Time) (time.Time, bool) {
	for {
		o.mu.Lock()
		ok, at := o.seen && o.has == has, o.at
		o.mu.Unlock()
		if ok {
			return at, true
		}
		d := time.Until(deadline)
		if d <= 0 {
			return time.Time{}, false
		}
		select {
		case <-o.moved:
		case <-time.After(min(d, 50*time.Millisecond)):
		}
	}
}

func measure(dir string, lead, node *proc, via string, n, trials, warmup int, jitter time.Duration) (result, error) {
	r := result{Clients: n, Via: via}
	runtime.GC()
	time.Sleep(time.Second)
	r.RSSBeforeKiB = rssKiB(node.cmd.Process.Pid)
	host, hp := splitPort(node.http)
	_, gp := splitPort(node.grpc)
	sc := []constant.ServerConfig{{IpAddr: host, Port: hp, GrpcPort: gp, ContextPath: "/nacos", Scheme: "http"}}
	cc := constant.NewClientConfig(constant.WithTimeoutMs(10000), constant.WithNotLoadCacheAtStart(true),
		constant.WithCacheDir(filepath.Join(dir, "sdk-cache")), constant.WithLogDir(filepath.Join(dir, "sdk-log")),
		constant.WithLogLevel("error"), constant.WithUpdateCacheWhenEmpty(true))
	clientsList := make([]naming_client.INamingClient, 0, n)
	obs := make([]*observer, n)
	defer func() {
		for _, c := range clientsList {
			c.CloseClient()
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 32)
	for i := range n {
		obs[i] = &observer{moved: make(chan struct{}, 1)}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: sc})
			if err == nil {
				err = c.Subscribe(&vo.SubscribeParam{ServiceName: service, SubscribeCallback: obs[i].callback})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			clientsList = append(clientsList, c)
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return r, fmt.Errorf("client: %w", firstErr)
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, o := range obs {
		if _, ok := o.waitFor(true, deadline); !ok {
			return r, fmt.Errorf("client %d saw no first list within 60 s", i)
		}
	}
	r.SubscribeS = time.Since(start).Seconds()
	time.Sleep(2 * time.Second)
	r.RSSIdleKiB = rssKiB(node.cmd.Process.Pid)
	r.PerConnKiB = float64(r.RSSIdleKiB-r.RSSBeforeKiB) / float64(n)
	r.NodeGoroutines = metric(node.http, "go_goroutines")
	acked0 := metric(node.http, `roster_nacos_grpc_pushes_total{result="acked"}`)

	var lat, last, writes []time.Duration
	var nodeCPU0, benchCPU0 time.Duration
	for trial := range warmup + trials {
		if trial == warmup {
			nodeCPU0, benchCPU0 = cpuTime(node.cmd.Process.Pid), cpuTime(os.Getpid())
			if cpuProfile != "" {
				go saveProfile(node.http, cpuProfile)
			}
		}
		for _, has := range []bool{false, true} {
			time.Sleep(time.Duration(rand.Int64N(int64(jitter) + 1)))
			t0 := time.Now()
			if err := write(lead.http, has); err != nil {
				return r, err
			}
			w := time.Since(t0)
			deadline := time.Now().Add(30 * time.Second)
			var worst time.Duration
			var got []time.Duration
			for i, o := range obs {
				at, ok := o.waitFor(has, deadline)
				if !ok {
					r.Missing++
					return r, fmt.Errorf("client %d did not see the change within 30 s", i)
				}
				d := max(at.Sub(t0), 0)
				got = append(got, d)
				worst = max(worst, d)
			}
			if trial >= warmup {
				r.Changes++
				lat = append(lat, got...)
				last = append(last, worst)
				writes = append(writes, w)
			}
		}
	}
	if r.Changes > 0 {
		r.NodeCPUMsPerChange = float64((cpuTime(node.cmd.Process.Pid) - nodeCPU0).Microseconds()) / 1000 / float64(r.Changes)
		r.BenchCPUMsPerChange = float64((cpuTime(os.Getpid()) - benchCPU0).Microseconds()) / 1000 / float64(r.Changes)
	}
	r.Callbacks = len(lat)
	r.Pushes = metric(node.http, `roster_nacos_grpc_pushes_total{result="acked"}`) - acked0
	r.WriteP50Ms = pct(writes, 0.5)
	r.CallbackP50Ms, r.CallbackP90Ms, r.CallbackP99Ms, r.CallbackMaxMs = pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99), pct(lat, 1)
	r.LastP50Ms, r.LastMaxMs = pct(last, 0.5), pct(last, 1)
	return r, nil
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// --- the cluster -------------------------------------------------------------------------

type proc struct {
	cmd              *exec.Cmd
	http, grpc, raft string
}

type cluster struct{ nodes []*proc }

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startCluster(bin, dir string) (*cluster, error) {
	c := &cluster{}
	var peers []string
	for i := range 3 {
		p := &proc{}
		var err error
		if p.http, err = freePort(); err != nil {
			return nil, err
		}
		if p.grpc, err = freePort(); err != nil {
			return nil, err
		}
		if p.raft, err = freePort(); err != nil {
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, p.raft))
		c.nodes = append(c.nodes, p)
	}
	for i, p := range c.nodes {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		if err != nil {
			return nil, err
		}
		p.cmd = exec.Command(bin, "server", "--node-id", fmt.Sprintf("n%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			"--http-addr", p.http, "--raft-addr", p.raft, "--grpc-addr", p.grpc, "--peers", strings.Join(peers, ","),
			"--dns-addr", "", "--probe-allow", "127.0.0.0/8,::1/128", "--log-level", "warn", "--pprof="+strconv.FormatBool(cpuProfile != ""))
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		if err := p.cmd.Start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) stop() {
	for _, p := range c.nodes {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range c.nodes {
		if p.cmd != nil && p.cmd.Process != nil {
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
	}
}

func (c *cluster) waitLeader(limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ready := 0
		for _, p := range c.nodes {
			if resp, err := http.Get("http://" + p.http + "/v1/status/ready"); err == nil {
				if resp.StatusCode == 200 {
					ready++
				}
				resp.Body.Close()
			}
		}
		if ready == 3 {
			var l struct {
				HTTPAddr string `json:"httpAddr"`
			}
			if err := getJSON("http://"+c.nodes[0].http+"/v1/status/leader", &l); err == nil {
				for i, p := range c.nodes {
					if p.http == l.HTTPAddr {
						return i, nil
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, errors.New("no ready cluster with a leader")
}

// --- HTTP --------------------------------------------------------------------------------

const svcPath = "/v1/namespaces/public/groups/DEFAULT_GROUP/services/" + service

func do(method, url, body string) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

func setup(leader string) error {
	base := "http://" + leader + svcPath
	if err := do(http.MethodPut, base+"/clusters/DEFAULT", `{"healthCheck":{"type":"NONE"}}`); err != nil {
		return err
	}
	for _, p := range []int{keptPort, movePort} {
		if err := do(http.MethodPut, base+"/instances/127.0.0.1:"+strconv.Itoa(p), `{}`); err != nil {
			return err
		}
	}
	return nil
}

// write registers the moving instance (has) or deregisters it.
func write(leader string, has bool) error {
	url := "http://" + leader + svcPath + "/instances/127.0.0.1:" + strconv.Itoa(movePort)
	if has {
		return do(http.MethodPut, url, `{}`)
	}
	return do(http.MethodDelete, url, "")
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// metric reads one sample (name with its labels, as /metrics prints it) of a node.
func metric(addr, sample string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, sample+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[len(sample):]), 64)
			return v
		}
	}
	return -1
}

// rssKiB is a process's VmRSS in KiB (-1 if unavailable).
func rssKiB(pid int) int64 {
	kb, err := procstat.StatusKiB(pid, "VmRSS")
	if err != nil {
		return -1
	}
	return kb
}

// saveProfile writes a 10 s CPU profile of a node to file.
func saveProfile(addr, file string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=10")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
	}
}

// cpuTime is a process's user+system CPU time (0 if unavailable).
func cpuTime(pid int) time.Duration {
	d, _ := procstat.CPUTime(pid)
	return d
}

func splitPort(addr string) (string, uint64) {
	h, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.ParseUint(p, 10, 64)
	return h, n
}
