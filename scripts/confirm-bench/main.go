// Command confirm-bench measures what majority confirmation of health transitions costs
// a 3-node cluster of real `roster server` processes on loopback:
//
//  1. CPU of the leader and of the followers for -n TCP instances probed every
//     -interval, while every instance is healthy, with confirm: leader and with
//     confirm: majority (confirmation happens on transitions only, so these should match);
//  2. the same while -flap of the instances go down and up again every -flap-period;
//  3. detection latency: -kills instances of another service are closed at once, and
//     the time from the close to the unhealthy state being visible on the leader is
//     reported, with confirm: majority and confirm: leader (expected at most
//     interval × fall + timeout, plus the confirmation's round trip).
//
// Every instance is a listener of this process on its own loopback address
// (127.1.x.y:9000), so nothing leaves the machine. CPU is read from /proc/PID/stat
// (user+system seconds over the window's wall seconds, in cores).
//
//	go run ./scripts/confirm-bench -n 10000 -interval 5s -window 30s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/procstat"
	"github.com/rosterhq/roster/internal/testnet"
)

const (
	ns    = "public"
	group = "DEFAULT_GROUP"
	port  = 9000
)

func main() {
	var (
		n          = flag.Int("n", 10000, "instances of the load service")
		interval   = flag.Duration("interval", 5*time.Second, "probe interval")
		window     = flag.Duration("window", 30*time.Second, "measurement window of each CPU point")
		warmup     = flag.Duration("warmup", 10*time.Second, "time before each window")
		flap       = flag.Float64("flap", 0.10, "share of the instances that flap in the flapping points")
		flapPeriod = flag.Duration("flap-period", 20*time.Second, "how long a flapping instance stays down, then up")
		kills      = flag.Int("kills", 50, "instances closed at once in the detection runs")
		bin        = flag.String("bin", "", "roster binary (default: go build ./cmd/roster)")
	)
	flag.Parse()
	if err := run(*n, *interval, *window, *warmup, *flap, *flapPeriod, *kills, *bin); err != nil {
		log.Fatal(err)
	}
}

// backend is one instance: a listener on its own loopback address that accepts and
// closes; down closes it, up listens again.
type backend struct {
	ip string
	mu sync.Mutex
	ln net.Listener
}

func (b *backend) up() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != nil {
		return nil
	}
	var err error
	for range 50 {
		if b.ln, err = net.Listen("tcp", net.JoinHostPort(b.ip, strconv.Itoa(port))); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	testnet.Serve(b.ln, nil)
	return nil
}

func (b *backend) down() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln != nil {
		_ = b.ln.Close()
		b.ln = nil
	}
}

func ipOf(service, k int) string { return fmt.Sprintf("127.%d.%d.%d", service, k/250, k%250+1) }

type node struct {
	id   string
	http string
	cmd  *exec.Cmd
}

func run(n int, interval, window, warmup time.Duration, flap float64, flapPeriod time.Duration, kills int, bin string) error {
	dir, err := os.MkdirTemp("", "confirm-bench")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if bin == "" {
		bin = filepath.Join(dir, "roster")
		build := exec.Command("go", "build", "-o", bin, "./cmd/roster")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	nodes, err := startCluster(bin, dir)
	if err != nil {
		return err
	}
	defer func() {
		for _, nd := range nodes {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
			_ = nd.cmd.Wait()
		}
	}()
	ctx := context.Background()
	cl := client.New(nodes[0].http)
	leader, err := waitLeader(ctx, nodes)
	if err != nil {
		return err
	}
	lc := client.New(leader.http)

	// The load service: n listeners, registered healthy.
	load := make([]*backend, n)
	for k := range load {
		load[k] = &backend{ip: ipOf(1, k)}
		if err := load[k].up(); err != nil {
			return fmt.Errorf("listen %s: %w", load[k].ip, err)
		}
	}
	timeout := min(2*time.Second, interval/2)
	setCheck := func(service string, confirm string) error {
		_, err := lc.UpsertCluster(ctx, ns, group, service, "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{
			Type: "TCP", Interval: interval.String(), Timeout: timeout.String(), Rise: 2, Fall: 3, Confirm: confirm}})
		return err
	}
	if err := setCheck("load", "leader"); err != nil {
		return err
	}
	t0 := time.Now()
	if err := registerAll(ctx, cl, "load", load); err != nil {
		return err
	}
	fmt.Printf("registered %d instances in %.1f s; leader %s\n", n, time.Since(t0).Seconds(), leader.id)

	point := func(name string) {
		time.Sleep(warmup)
		before := leaderCounters(leader)
		cpu := measure(nodes, leader, window)
		after := leaderCounters(leader)
		fmt.Printf("%-34s leader %.3f cores, followers %s cores; in the window: %.0f transitions committed, %.0f confirmations, %.0f overruled\n",
			name, cpu[leader.id], followerCPU(cpu, nodes, leader),
			after[0]-before[0], after[1]-before[1], after[2]-before[2])
	}
	point("all healthy, confirm=leader")
	if err := setCheck("load", "majority"); err != nil {
		return err
	}
	point("all healthy, confirm=majority")

	flapping := load[:int(float64(n)*flap)]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		downNow := false
		tick := time.NewTicker(flapPeriod)
		defer tick.Stop()
		for {
			downNow = !downNow
			for _, b := range flapping {
				if downNow {
					b.down()
				} else if err := b.up(); err != nil {
					log.Printf("flap: %v", err)
				}
			}
			select {
			case <-stop:
				for _, b := range flapping {
					_ = b.up()
				}
				return
			case <-tick.C:
			}
		}
	})
	point(fmt.Sprintf("%.0f%% flapping, confirm=majority", flap*100))
	if err := setCheck("load", "leader"); err != nil {
		return err
	}
	point(fmt.Sprintf("%.0f%% flapping, confirm=leader", flap*100))
	close(stop)
	wg.Wait()

	// Detection: kills instances of another service, closed at once.
	for _, confirm := range []string{"majority", "leader"} {
		svc := "detect-" + confirm
		det := make([]*backend, kills)
		for k := range det {
			det[k] = &backend{ip: ipOf(2, k+len(det)*slices.Index([]string{"majority", "leader"}, confirm))}
			if err := det[k].up(); err != nil {
				return err
			}
		}
		if err := setCheck(svc, confirm); err != nil {
			return err
		}
		if err := registerAll(ctx, cl, svc, det); err != nil {
			return err
		}
		time.Sleep(3 * interval) // every instance probed and healthy a few times
		closed := time.Now()
		for _, b := range det {
			b.down()
		}
		lat, err := detect(ctx, lc, svc, det, closed, 3*interval*3)
		if err != nil {
			return err
		}
		slices.Sort(lat)
		fmt.Printf("detection, confirm=%-8s %d instances: p50 %.2f s, p90 %.2f s, max %.2f s (interval×fall+timeout = %.1f s)\n",
			confirm, len(lat), pct(lat, 0.5), pct(lat, 0.9), lat[len(lat)-1], (interval*3 + timeout).Seconds())
	}
	return nil
}

// startCluster starts three nodes bootstrapped together on loopback ports.
func startCluster(bin, dir string) ([]*node, error) {
	var raftAddrs, httpAddrs []string
	for range 3 {
		raftAddrs = append(raftAddrs, freePort())
		httpAddrs = append(httpAddrs, freePort())
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, raftAddrs[i]))
	}
	var nodes []*node
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		logf, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "server", "--node-id", id, "--data-dir", filepath.Join(dir, id),
			"--http-addr", httpAddrs[i], "--raft-addr", raftAddrs[i], "--peers", strings.Join(peers, ","),
			"--grpc-addr", "off", "--dns-addr", "", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		nodes = append(nodes, &node{id: id, http: httpAddrs[i], cmd: cmd})
	}
	return nodes, nil
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

func waitLeader(ctx context.Context, nodes []*node) (*node, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range nodes {
			l, err := client.New(nd.http).Leader(ctx)
			if err != nil || l.ID == "" {
				continue
			}
			for _, m := range nodes {
				if m.id == l.ID {
					if r, err := client.New(m.http).Ready(ctx); err == nil && r.Ready {
						return m, nil
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, errors.New("no ready leader within 30 s")
}

// registerAll registers every backend of a service through 32 concurrent clients.
func registerAll(ctx context.Context, cl *client.Client, service string, bs []*backend) error {
	work := make(chan *backend)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for b := range work {
				if _, err := cl.RegisterInstance(ctx, ns, group, service, b.ip, port, api.InstanceRequest{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, b := range bs {
		select {
		case work <- b:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// measure returns each node's CPU, in cores, over window.
func measure(nodes []*node, _ *node, window time.Duration) map[string]float64 {
	before := map[string]float64{}
	for _, nd := range nodes {
		before[nd.id] = cpuSeconds(nd.cmd.Process.Pid)
	}
	start := time.Now()
	time.Sleep(window)
	wall := time.Since(start).Seconds()
	out := map[string]float64{}
	for _, nd := range nodes {
		out[nd.id] = (cpuSeconds(nd.cmd.Process.Pid) - before[nd.id]) / wall
	}
	return out
}

// leaderCounters reads the leader's committed transitions, confirmations and overruled
// transitions from /metrics.
func leaderCounters(leader *node) [3]float64 {
	var out [3]float64
	resp, err := http.Get("http://" + leader.http + "/metrics")
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.HasPrefix(f[0], "roster_health_transitions_committed_total{"):
			out[0] += v
		case f[0] == "roster_health_confirmations_total":
			out[1] = v
		case f[0] == "roster_health_transitions_overruled_total":
			out[2] = v
		}
	}
	return out
}

func followerCPU(cpu map[string]float64, nodes []*node, leader *node) string {
	var parts []string
	for _, nd := range nodes {
		if nd != leader {
			parts = append(parts, fmt.Sprintf("%.3f", cpu[nd.id]))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuSeconds is a process's user+system CPU time (0 if unavailable).
func cpuSeconds(pid int) float64 {
	d, _ := procstat.CPUTime(pid)
	return d.Seconds()
}

// detect polls the leader until every closed instance is unhealthy and returns the time
// from the close to when each was first seen so.
func detect(ctx context.Context, lc *client.Client, service string, bs []*backend, closed time.Time, limit time.Duration) ([]float64, error) {
	seen := map[string]float64{}
	deadline := closed.Add(limit)
	for len(seen) < len(bs) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %d of %d instances unhealthy after %s", service, len(seen), len(bs), limit)
		}
		res, _, err := lc.Instances(ctx, ns, group, service, client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
		now := time.Since(closed).Seconds()
		if err == nil {
			for _, in := range res.Instances {
				if !in.Healthy {
					if _, ok := seen[in.IP]; !ok {
						seen[in.IP] = now
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := make([]float64, 0, len(seen))
	for _, v := range seen {
		out = append(out, v)
	}
	return out, nil
}

func pct(sorted []float64, p float64) float64 {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
