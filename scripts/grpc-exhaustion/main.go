// Command grpc-exhaustion floods a Roster node's Nacos gRPC port without credentials
// and measures what the node keeps doing (docs/security.md, "The Nacos gRPC port").
//
// It starts a 3-node cluster with ACLs and TLS on (a roster binary built from
// ./cmd/roster, or -roster-bin), on 127.0.0.1 with ports the system picks, and picks a
// follower as the target. For -idle it measures the target's HTTPS latency (an
// authenticated GET /v1/namespaces every 20 ms), its roster_raft_last_contact_seconds
// and its RSS; then for -duration it does the same while -conns attacker goroutines,
// from -sources loopback addresses (127.0.0.2 on), flood the target's gRPC port: a
// third open connections that send HTTP/2's preface and nothing more, a third register
// sessions without a token and hold them, a third send 4 streams of 1 MiB messages but
// their last byte and hold; each reconnects as soon as it is cut off (after 100 ms when
// refused). The attack runs in a process of its own (this binary with -attack) on the
// same cores; -attacker-in-process runs it beside the prober instead. Every 5 s of the
// attack a real nacos-sdk-go v2 client (its token, TLS) connects to the target from
// 127.0.0.1, an address the attack does not use, and reads a service. Everything is on
// loopback.
//
//	go run ./scripts/grpc-exhaustion -conns 3000 -duration 60s
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rosterhq/roster/internal/grpcflood"
	"github.com/rosterhq/roster/internal/procstat"
)

type node struct {
	id, http, raft, grpc string
	cmd                  *exec.Cmd
}

func main() {
	var (
		conns     = flag.Int("conns", 3000, "attacker goroutines (each holds one connection at a time)")
		sources   = flag.Int("sources", 30, "loopback source addresses of the attack")
		duration  = flag.Duration("duration", 60*time.Second, "length of the attack")
		idle      = flag.Duration("idle", 15*time.Second, "length of the idle measurement before it")
		bin       = flag.String("roster-bin", "", "roster binary (default: built from ./cmd/roster)")
		out       = flag.String("out", "", "write the results as JSON to this file")
		inProc    = flag.Bool("attacker-in-process", false, "run the attack in this process, beside the HTTPS prober and the SDK clients (the first measurement's method; their latency then includes this process's scheduling of the attack's goroutines)")
		elsewhere = flag.Bool("flood-elsewhere", false, "a control: flood the other follower's gRPC port, not the target's, so that the target shares the cores with the same attack without receiving it")
		extra     = flag.String("roster-args", "", "more arguments for every node (space-separated), e.g. \"--grpc-accept-rate-per-ip 2\"")
		attackOn  = flag.String("attack", "", "internal: be the attacker process, flooding this gRPC address until stdin closes")
		caFlag    = flag.String("ca-file", "", "internal: the CA of -attack's target")
	)
	flag.Parse()
	if *attackOn != "" {
		attacker(*attackOn, *caFlag, *conns, *sources)
		return
	}
	dir, err := os.MkdirTemp("", "grpc-exhaustion")
	check(err)
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "roster")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/roster")
		build.Stdout, build.Stderr, build.Env = os.Stderr, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
		check(build.Run())
	}
	run := func(args ...string) []byte {
		out, err := exec.Command(*bin, args...).Output()
		if err != nil {
			fail("roster %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	tlsDir := filepath.Join(dir, "tls")
	run("tls", "ca", "create", "--dir", tlsDir)
	nodes := make([]*node, 3)
	var peers []string
	for i := range nodes {
		nodes[i] = &node{id: fmt.Sprintf("n%d", i+1), http: freeAddr(), raft: freeAddr(), grpc: freeAddr()}
		run("tls", "cert", "create", "--dir", tlsDir, "--node", nodes[i].id, "--ip", "127.0.0.1")
		peers = append(peers, nodes[i].id+"="+nodes[i].raft)
	}
	caFile := filepath.Join(tlsDir, "ca.pem")
	for _, n := range nodes {
		n.cmd = exec.Command(*bin, "server", "--node-id", n.id, "--data-dir", filepath.Join(dir, n.id),
			"--http-addr", n.http, "--raft-addr", n.raft, "--grpc-addr", n.grpc, "--peers", strings.Join(peers, ","),
			"--dns-addr", "", "--probe-allow", "127.0.0.0/8,::1/128", "--log-level", "error", "--acl-enabled",
			"--tls-cert-file", filepath.Join(tlsDir, n.id+".pem"), "--tls-key-file", filepath.Join(tlsDir, n.id+"-key.pem"), "--tls-ca-file", caFile)
		n.cmd.Args = append(n.cmd.Args, strings.Fields(*extra)...)
		n.cmd.Stderr = os.Stderr
		check(n.cmd.Start())
	}
	defer func() {
		for _, n := range nodes {
			_ = n.cmd.Process.Kill()
			_ = n.cmd.Wait()
		}
	}()
	for _, n := range nodes {
		waitFor(60*time.Second, "node "+n.id+" ready", func() bool {
			return exec.Command(*bin, "ready", "--addr", "https://"+n.http, "--ca-file", caFile).Run() == nil
		})
	}
	var boot struct {
		SecretID string `json:"secretId"`
	}
	check(json.Unmarshal(run("acl", "bootstrap", "--addr", "https://"+nodes[0].http, "--ca-file", caFile, "-o", "json"), &boot))
	var tok struct {
		AccessorID string `json:"accessorId"`
		SecretID   string `json:"secretId"`
	}
	check(json.Unmarshal(run("acl", "token", "create", "--addr", "https://"+nodes[0].http, "--ca-file", caFile, "--token", boot.SecretID,
		"--description", "grpc-exhaustion", "--namespace", "public=write", "-o", "json"), &tok))

	pem, err := os.ReadFile(caFile)
	check(err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 4}}

	var target *node
	waitFor(30*time.Second, "a follower", func() bool {
		for _, n := range nodes {
			if v, ok := metric(hc, n.http, "roster_raft_is_leader"); ok && v == 0 {
				if c, ok := metric(hc, n.http, "roster_raft_last_contact_seconds"); ok && c >= 0 {
					target = n
					return true
				}
			}
		}
		return false
	})
	fmt.Fprintf(os.Stderr, "target %s (https %s, grpc %s)\n", target.id, target.http, target.grpc)

	idleRes := measure(hc, target, tok.SecretID, *idle, nil)
	fmt.Fprintf(os.Stderr, "idle: %+v\n", idleRes)

	// The attack runs in its own process (on the same cores), so that the prober's and
	// the SDK clients' latency is the target's and not this process's scheduling of
	// thousands of attacker goroutines.
	floodAddr := target.grpc
	if *elsewhere {
		for _, n := range nodes {
			if v, ok := metric(hc, n.http, "roster_raft_is_leader"); ok && v == 0 && n != target {
				floodAddr = n.grpc
			}
		}
		if floodAddr == target.grpc {
			fail("no other follower to flood")
		}
	}
	var stopAttack func() int64
	var attackerCPU float64
	if *inProc {
		stopAttack = flood(grpcflood.Target{Addr: floodAddr, TLS: tlsCfg}, *conns, *sources)
	} else {
		self, err := os.Executable()
		check(err)
		ac := exec.Command(self, "-attack", floodAddr, "-ca-file", caFile, "-conns", strconv.Itoa(*conns), "-sources", strconv.Itoa(*sources))
		stdin, err := ac.StdinPipe()
		check(err)
		var aout strings.Builder
		ac.Stdout, ac.Stderr = &aout, os.Stderr
		check(ac.Start())
		stopAttack = func() int64 {
			_ = stdin.Close()
			check(ac.Wait())
			attackerCPU = (ac.ProcessState.UserTime() + ac.ProcessState.SystemTime()).Seconds()
			n, err := strconv.ParseInt(strings.TrimSpace(aout.String()), 10, 64)
			check(err)
			return n
		}
	}
	legit := func() (ok bool, took time.Duration) {
		host, hp := split(target.http)
		_, gp := split(target.grpc)
		cdir, _ := os.MkdirTemp(dir, "sdk")
		cc := constant.NewClientConfig(constant.WithTimeoutMs(5000), constant.WithNotLoadCacheAtStart(true),
			constant.WithCacheDir(cdir), constant.WithLogDir(cdir), constant.WithLogLevel("error"),
			constant.WithUsername(tok.AccessorID), constant.WithPassword(tok.SecretID),
			constant.WithTLS(constant.TLSConfig{Enable: true, CaFile: caFile}))
		start := time.Now()
		cl, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: cc, ServerConfigs: []constant.ServerConfig{
			{IpAddr: host, Port: hp, GrpcPort: gp, ContextPath: "/nacos", Scheme: "https"}}})
		if err != nil {
			return false, time.Since(start)
		}
		defer cl.CloseClient()
		_, err = cl.GetService(vo.GetServiceParam{ServiceName: "grpc-exhaustion"})
		return err == nil, time.Since(start)
	}
	var legitOK, legitTried int
	var legitTimes []time.Duration
	attack := measure(hc, target, tok.SecretID, *duration, func(stop <-chan struct{}) {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ok, took := legit()
				legitTried++
				if ok {
					legitOK++
					legitTimes = append(legitTimes, took)
				}
			}
		}
	})
	refused, _ := metric(hc, target.http, "roster_nacos_grpc_transports_refused_total")
	closed, _ := metric(hc, target.http, "roster_nacos_grpc_transports_closed_total")
	refusedBy := metricBy(hc, target.http, "roster_nacos_grpc_transports_refused_total")
	closedBy := metricBy(hc, target.http, "roster_nacos_grpc_transports_closed_total")
	attempts := stopAttack()
	slices.Sort(legitTimes)
	res := map[string]any{
		"conns": *conns, "sources": *sources, "duration_s": duration.Seconds(), "attack_connections_made": attempts, "attacker_in_process": *inProc,
		"flooded_elsewhere": *elsewhere, "roster_args": *extra, "attacker_cpu_s": float64(int(attackerCPU*100)) / 100,
		"idle": idleRes, "attack": attack,
		"https_p99_ratio":              ratio(attack.HTTPSP99ms, idleRes.HTTPSP99ms),
		"raft_last_contact_max_ratio":  ratio(attack.RaftLastContactMaxS, idleRes.RaftLastContactMaxS),
		"rss_growth_mib":               attack.RSSMaxMiB - idleRes.RSSMaxMiB,
		"legit_clients_ok":             legitOK,
		"legit_clients_tried":          legitTried,
		"legit_client_connect_read_ms": durationsMs(legitTimes),
		"transports_refused":           refused, "transports_closed": closed,
		"transports_refused_by": refusedBy, "transports_closed_by": closedBy,
		"target_cpu_s_idle": idleRes.CPUSeconds, "target_cpu_s_attack": attack.CPUSeconds,
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	if *out != "" {
		check(os.WriteFile(*out, b, 0o644))
	}
}

// attacker is the attacker process: it floods addr until its stdin closes, then prints
// the connections it made.
func attacker(addr, caFile string, conns, sources int) {
	pem, err := os.ReadFile(caFile)
	check(err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	stop := flood(grpcflood.Target{Addr: addr, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, conns, sources)
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Println(stop())
}

// flood starts conns attacker goroutines from sources loopback addresses: a third idle
// after HTTP/2's preface, a third registered sessions, a third holding large messages;
// each reconnects as soon as it is cut off (after 100 ms when refused). The function
// returned stops them and returns the connections made.
func flood(ft grpcflood.Target, conns, sources int) (stop func() int64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var attempts atomic.Int64
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := grpcflood.Loopback(i % sources)
			for ctx.Err() == nil {
				attempts.Add(1)
				var err error
				switch i % 3 {
				case 0:
					_, err = ft.Idle(ctx, from)
				case 1:
					_, err = ft.Session(ctx, from, nil)
				default:
					_, _, err = ft.Hold(ctx, from, 4, 1<<20)
				}
				if err != nil && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond) // refused at accept: try again soon
				}
			}
		}()
	}
	return func() int64 {
		cancel()
		wg.Wait()
		return attempts.Load()
	}
}

// result is one phase's figures on the target.
type result struct {
	HTTPSRequests       int     `json:"https_requests"`
	HTTPSErrors         int     `json:"https_errors"`
	HTTPSP50ms          float64 `json:"https_p50_ms"`
	HTTPSP99ms          float64 `json:"https_p99_ms"`
	RaftLastContactMaxS float64 `json:"raft_last_contact_max_s"`
	RSSStartMiB         float64 `json:"rss_start_mib"`
	RSSMaxMiB           float64 `json:"rss_max_mib"`
	TransportsMax       float64 `json:"grpc_transports_max"`
	// CPUSeconds is the target's user and system CPU time over the phase.
	CPUSeconds float64 `json:"cpu_s"`
}

// measure samples the target for d while side runs (nil: nothing else).
func measure(hc *http.Client, n *node, token string, d time.Duration, side func(stop <-chan struct{})) result {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var r result
	var lat []float64
	r.RSSStartMiB = rss(n.cmd.Process.Pid)
	cpu0 := cpuSeconds(n.cmd.Process.Pid)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			req, _ := http.NewRequest(http.MethodGet, "https://"+n.http+"/v1/namespaces", nil)
			req.Header.Set("X-Roster-Token", token)
			start := time.Now()
			resp, err := hc.Do(req)
			took := time.Since(start)
			mu.Lock()
			r.HTTPSRequests++
			if err != nil || resp.StatusCode != http.StatusOK {
				r.HTTPSErrors++
			} else {
				lat = append(lat, float64(took.Microseconds())/1000)
			}
			mu.Unlock()
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			c, _ := metric(hc, n.http, "roster_raft_last_contact_seconds")
			t, _ := metric(hc, n.http, "roster_nacos_grpc_transports")
			m := rss(n.cmd.Process.Pid)
			mu.Lock()
			r.RaftLastContactMaxS = max(r.RaftLastContactMaxS, c)
			r.TransportsMax = max(r.TransportsMax, t)
			r.RSSMaxMiB = max(r.RSSMaxMiB, m)
			mu.Unlock()
		}
	}()
	if side != nil {
		wg.Add(1)
		go func() { defer wg.Done(); side(stop) }()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	r.CPUSeconds = float64(int((cpuSeconds(n.cmd.Process.Pid)-cpu0)*100)) / 100
	slices.Sort(lat)
	r.HTTPSP50ms, r.HTTPSP99ms = pct(lat, 0.50), pct(lat, 0.99)
	return r
}

func pct(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return float64(int(a/b*100)) / 100
}

func durationsMs(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}

// metric is the sum of a metric's samples on the node's /metrics.
func metric(hc *http.Client, addr, name string) (float64, bool) {
	resp, err := hc.Get("https://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// metricBy is a metric's samples on the node's /metrics by their label set.
func metricBy(hc *http.Client, addr, name string) map[string]float64 {
	out := map[string]float64{}
	resp, err := hc.Get("https://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
			out[strings.TrimPrefix(f[0], name)] = v
		}
	}
	return out
}

// cpuSeconds is a process's user and system CPU time (0 if unavailable).
func cpuSeconds(pid int) float64 {
	d, _ := procstat.CPUTime(pid)
	return d.Seconds()
}

// rss is a process's VmRSS in MiB, to a tenth (0 if unavailable).
func rss(pid int) float64 {
	kb, err := procstat.StatusKiB(pid, "VmRSS")
	if err != nil {
		return 0
	}
	return float64(int(float64(kb)/1024*10)) / 10
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer ln.Close()
	return ln.Addr().String()
}

func split(addr string) (string, uint64) {
	h, p, err := net.SplitHostPort(addr)
	check(err)
	n, err := strconv.ParseUint(p, 10, 16)
	check(err)
	return h, n
}

func waitFor(d time.Duration, what string, ok func() bool) {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			fail("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "grpc-exhaustion: "+format+"\n", args...)
	os.Exit(1)
}
