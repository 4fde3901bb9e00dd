//go:build linux

package faults

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/model"
)

// CrashIP is the address of the instances the crash test registers.
const CrashIP = "127.109.0.1"

// CrashResult is what one crash iteration did.
type CrashResult struct {
	Service string
	// Acked, Unknown and Failed count registrations by outcome.
	Acked, Unknown, Failed int
	// UnknownPresent counts registrations with unknown outcome found after the restart.
	UnknownPresent int
	// WriteTime is how long writes ran before every node was killed; Recovery the time
	// from the restart to a healthy cluster.
	WriteTime, Recovery time.Duration
}

// CrashIteration registers instances of a new service from several writers on random
// nodes, kills every node with SIGKILL at a random moment, restarts them all, and
// checks that every acknowledged registration is present exactly once, that nothing
// unasked-for appeared, and that every node converges to the same instance list.
func CrashIteration(ctx context.Context, c *Cluster, rng *rand.Rand, iteration int, logf func(string, ...any)) (CrashResult, error) {
	res := CrashResult{Service: fmt.Sprintf("crash-%d", iteration)}
	l, err := c.WaitHealthy(ctx, 30*time.Second)
	if err != nil {
		return res, err
	}
	none := api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: string(model.CheckNone)}}
	cctx, cancel := withTimeout(ctx)
	_, err = l.Client().UpsertCluster(cctx, namespace, group, res.Service, model.DefaultCluster, none)
	cancel()
	if err != nil {
		return res, fmt.Errorf("create %s: %w", res.Service, err)
	}

	const writers = 4
	var (
		mu      sync.Mutex
		acked   = map[int]uint64{}
		unknown = map[int]bool{}
		tried   = map[int]bool{}
		wg      sync.WaitGroup
	)
	wctx, stopWriters := context.WithCancel(ctx)
	seeds := make([]uint64, writers)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	for wr := 0; wr < writers; wr++ {
		wg.Add(1)
		go func(wr int) {
			defer wg.Done()
			wrng := rand.New(rand.NewPCG(seeds[wr], 7))
			for seq := 0; wctx.Err() == nil && seq < 9999; seq++ {
				port := 1 + wr*10000 + seq
				n := c.Nodes[wrng.IntN(len(c.Nodes))]
				cl := n.Client()
				if cl == nil {
					continue
				}
				mu.Lock()
				tried[port] = true
				mu.Unlock()
				rctx, cancel := withTimeout(context.Background())
				idx, err := cl.RegisterInstance(rctx, namespace, group, res.Service, CrashIP, port,
					api.InstanceRequest{Metadata: map[string]string{"w": fmt.Sprint(wr)}})
				cancel()
				mu.Lock()
				switch classify(err) {
				case OK:
					acked[port] = idx
				case Unknown, NotFound:
					unknown[port] = true
				default:
					res.Failed++
				}
				mu.Unlock()
			}
		}(wr)
	}
	res.WriteTime = time.Duration(200+rng.IntN(600)) * time.Millisecond
	select {
	case <-ctx.Done():
	case <-time.After(res.WriteTime):
	}
	for _, i := range rng.Perm(len(c.Nodes)) {
		c.Kill(c.Nodes[i])
	}
	stopWriters()
	wg.Wait()
	res.Acked, res.Unknown = len(acked), len(unknown)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	restart := time.Now()
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return res, err
		}
	}
	l, err = c.WaitHealthy(ctx, 30*time.Second)
	if err != nil {
		return res, fmt.Errorf("after restarting every node: %w", err)
	}
	res.Recovery = time.Since(restart)

	var list []api.Instance
	for {
		rctx, cancel := withTimeout(ctx)
		resp, _, err := l.Client().Instances(rctx, namespace, group, res.Service, client.InstancesQuery{})
		cancel()
		if err == nil {
			list = resp.Instances
			break
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if l, err = c.WaitHealthy(ctx, 30*time.Second); err != nil {
			return res, err
		}
	}
	seen := map[int]int{}
	for _, in := range list {
		if in.IP != CrashIP {
			return res, fmt.Errorf("%s: unexpected instance %s", res.Service, in.Addr())
		}
		seen[in.Port]++
	}
	var problems []string
	for port, n := range seen {
		switch {
		case n > 1:
			problems = append(problems, fmt.Sprintf("instance :%d listed %d times", port, n))
		case !tried[port]:
			problems = append(problems, fmt.Sprintf("instance :%d was never registered", port))
		case unknown[port]:
			res.UnknownPresent++
		}
	}
	ports := make([]int, 0, len(acked))
	for port := range acked {
		ports = append(ports, port)
	}
	sort.Ints(ports)
	for _, port := range ports {
		if seen[port] == 0 {
			problems = append(problems, fmt.Sprintf("acknowledged registration :%d (index %d) is lost", port, acked[port]))
		}
	}
	if len(problems) > 0 {
		return res, fmt.Errorf("%s after kill -9 of every node: %s", res.Service, strings.Join(problems, "; "))
	}
	if err := converge(ctx, c, res.Service, list); err != nil {
		return res, err
	}
	logf("crash %d: %d acked, %d unknown (%d present), %d refused; writes %s, recovery %s",
		iteration, res.Acked, res.Unknown, res.UnknownPresent, res.Failed, res.WriteTime, res.Recovery.Round(time.Millisecond))
	return res, nil
}

// converge waits until a stale read on every node returns want.
func converge(ctx context.Context, c *Cluster, service string, want []api.Instance) error {
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		for {
			cl := n.Client()
			if cl == nil {
				return fmt.Errorf("%s: %w", n.ID, errNotRunning)
			}
			rctx, cancel := withTimeout(ctx)
			resp, _, err := cl.Instances(rctx, namespace, group, service,
				client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: api.ConsistencyStale}})
			cancel()
			if err == nil && sameInstances(resp.Instances, want) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s does not converge to the leader's %d instances (has %d, err %v)",
					service, n.ID, len(want), len(resp.Instances), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// sameInstances compares two lists by address, metadata and registration epoch.
func sameInstances(a, b []api.Instance) bool {
	type key struct {
		addr   string
		md     string
		create uint64
	}
	k := func(list []api.Instance) []key {
		out := make([]key, len(list))
		for i, in := range list {
			out[i] = key{in.Addr(), fmt.Sprint(in.Metadata), in.CreateIndex}
		}
		return out
	}
	return reflect.DeepEqual(k(a), k(b))
}

// knownLogErrors lists Roster error lines that a fault can provoke and that are
// reported but not fixed yet (docs/reliability.md, "Findings"): ScanLogs returns them
// apart, so that they are shown without failing the run. Each is a substring of the line.
func knownLogErrors() []string {
	return nil
}

// expectedLogErrors are substrings of error lines a fault provokes on purpose: a node
// whose disk the disk-full fault filled reports the writes that fail, at ERROR, as it
// would on a real full disk.
var expectedLogErrors = []string{"no space left on device"}

// ScanLogs returns the lines of the nodes' logs that report a panic, a fatal error or
// an error of Roster's own (Raft's transport errors excluded), and apart from them the
// lines of known, reported errors.
func ScanLogs(c *Cluster) (errs, known []string, err error) {
	var out []string
	for _, n := range c.Nodes {
		f, err := os.Open(n.LogPath)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			// Raft logs connection failures at ERROR, which the faults cause on purpose.
			if !strings.HasPrefix(line, "panic:") && !strings.HasPrefix(line, "fatal error:") &&
				(!strings.Contains(line, "level=ERROR") || strings.Contains(line, "logger=raft")) {
				continue
			}
			expected := false
			for _, e := range expectedLogErrors {
				expected = expected || strings.Contains(line, e)
			}
			if expected {
				continue
			}
			isKnown := false
			for _, k := range knownLogErrors() {
				isKnown = isKnown || strings.Contains(line, k)
			}
			if isKnown {
				known = append(known, n.ID+": "+line)
			} else {
				out = append(out, n.ID+": "+line)
			}
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return out, known, nil
}
