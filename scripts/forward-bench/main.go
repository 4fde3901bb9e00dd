// Command forward-bench measures requests sent to a follower that need the leader:
// registrations through the native REST API ("native") and through the Nacos 2.x gRPC
// API ("grpc": PersistentInstanceRequest, as Java clients from 2.3 send it), and reads of
// a 10-instance service through the native API, linearizable ("read") and leader-local
// ("read-leader"), at each concurrency, for one or more roster binaries, alternating the
// binaries over rounds so that they see the same machine. Each round starts a fresh
// 3-node cluster of real processes on loopback (the fault suite's harness); instances
// are 127.0.0.1 ports in a NONE cluster, so nothing is probed.
//
//	go run ./scripts/forward-bench -bins before=/tmp/roster-main,after=/tmp/roster \
//	    -rounds 3 -duration 5s -concurrency 1,64 -surfaces native,grpc,read,read-leader -out forward.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/nacosrpc"
	"github.com/rosterhq/roster/test/faults"
)

type result struct {
	Binary      string  `json:"binary"`
	Round       int     `json:"round"`
	Surface     string  `json:"surface"`
	Concurrency int     `json:"concurrency"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	PerSecond   float64 `json:"perSecond"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
}

func main() {
	var (
		bins     = flag.String("bins", "", "comma-separated label=path of roster binaries")
		rounds   = flag.Int("rounds", 3, "rounds (each runs every binary once)")
		duration = flag.Duration("duration", 5*time.Second, "measured time per surface and concurrency")
		conc     = flag.String("concurrency", "1,64", "comma-separated numbers of concurrent writers")
		out      = flag.String("out", "", "write the results as JSON to this file")
		which    = flag.String("surfaces", "native,grpc,read,read-leader", "comma-separated surfaces to measure")
	)
	flag.Parse()
	var labels, paths []string
	for _, b := range strings.Split(*bins, ",") {
		l, p, ok := strings.Cut(b, "=")
		if !ok {
			log.Fatalf("-bins: %q is not label=path", b)
		}
		labels, paths = append(labels, l), append(paths, p)
	}
	var levels []int
	for _, c := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			log.Fatalf("-concurrency: %q", c)
		}
		levels = append(levels, n)
	}
	var all []result
	for round := 1; round <= *rounds; round++ {
		for i, bin := range paths {
			rs, err := runOne(bin, *duration, levels, strings.Split(*which, ","))
			if err != nil {
				log.Fatalf("round %d, %s: %v", round, labels[i], err)
			}
			for _, r := range rs {
				r.Binary, r.Round = labels[i], round
				all = append(all, r)
				fmt.Fprintf(os.Stderr, "round %d %-8s %-6s c=%-3d %8.0f/s p50 %6.2f ms p99 %6.2f ms (%d errors)\n",
					round, r.Binary, r.Surface, r.Concurrency, r.PerSecond, r.P50Ms, r.P99Ms, r.Errors)
			}
		}
	}
	summarize(all)
	if *out != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// runOne starts a cluster of bin and measures the surfaces named in which at every level.
func runOne(bin string, d time.Duration, levels []int, which []string) ([]result, error) {
	dir, err := os.MkdirTemp("", "forward-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := faults.StartCluster(faults.ClusterConfig{Binary: bin, Dir: filepath.Join(dir, "c"), Nodes: 3})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	var f *faults.Node
	for _, n := range c.Nodes {
		if n != leader {
			f = n
			break
		}
	}
	if _, err := leader.Client().UpsertCluster(ctx, "public", "bench", "orders", "c1",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		return nil, err
	}
	rpc, err := nacosrpc.Dial(ctx, f.GRPCAddr())
	if err != nil {
		return nil, err
	}
	defer rpc.Close()
	native := f.Client()
	// The service the reads read: 10 instances.
	for i := range 10 {
		if _, err := leader.Client().RegisterInstance(ctx, "public", "bench", "catalog", "127.0.0.1", 9000+i,
			api.InstanceRequest{Cluster: ptr("c1"), Metadata: map[string]string{"zone": "a"}}); err != nil {
			return nil, err
		}
	}
	if _, err := leader.Client().UpsertCluster(ctx, "public", "bench", "catalog", "c1",
		api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		return nil, err
	}
	read := func(mode string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			list, _, err := native.Instances(ctx, "public", "bench", "catalog", client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: mode}})
			if err == nil && len(list.Instances) != 10 {
				err = fmt.Errorf("read %d instances, want 10", len(list.Instances))
			}
			return err
		}
	}
	var port atomic.Int64
	port.Store(10000)
	surfaces := []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"native", func(ctx context.Context) error {
			p := int(port.Add(1)%50000) + 10000
			_, err := native.RegisterInstance(ctx, "public", "bench", "orders", "127.0.0.1", p,
				api.InstanceRequest{Cluster: ptr("c1"), Metadata: map[string]string{"zone": "a"}})
			return err
		}},
		{"grpc", func(ctx context.Context) error {
			p := int(port.Add(1)%50000) + 10000
			m, err := rpc.RegisterPersistent(ctx, "bench", "orders", "c1", "127.0.0.1", p, 1, map[string]string{"zone": "a"})
			if err == nil && m["resultCode"] != float64(200) {
				err = fmt.Errorf("registration answered %v", m)
			}
			return err
		}},
		{"read", read(api.ConsistencyLinearizable)},
		{"read-leader", read(api.ConsistencyLeader)},
	}
	var out []result
	for _, s := range surfaces {
		if !slices.Contains(which, s.name) {
			continue
		}
		for _, n := range levels {
			_ = run(ctx, s.write, n, time.Second) // warm-up
			out = append(out, measure(ctx, s.name, s.write, n, d))
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

func run(ctx context.Context, write func(context.Context) error, n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_ = write(ctx)
			}
		}()
	}
	wg.Wait()
	return nil
}

func measure(ctx context.Context, name string, write func(context.Context) error, n int, d time.Duration) result {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				err := write(wctx)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{Surface: name, Concurrency: n, Ops: int64(len(lat)), Errors: errs.Load(), PerSecond: float64(len(lat)) / d.Seconds()}
	if len(lat) > 0 {
		r.P50Ms = ms(lat[len(lat)/2])
		r.P99Ms = ms(lat[min(len(lat)-1, len(lat)*99/100)])
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarize prints the median over rounds of each binary, surface and concurrency.
func summarize(all []result) {
	type key struct {
		bin, surface string
		c            int
	}
	groups := map[key][]result{}
	var keys []key
	for _, r := range all {
		k := key{r.Binary, r.Surface, r.Concurrency}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	med := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	fmt.Println("binary   surface concurrency  per second (median; range)   p50 ms  p99 ms  errors")
	for _, k := range keys {
		rs := groups[k]
		lo, hi := rs[0].PerSecond, rs[0].PerSecond
		var errs int64
		for _, r := range rs {
			lo, hi = min(lo, r.PerSecond), max(hi, r.PerSecond)
			errs += r.Errors
		}
		fmt.Printf("%-8s %-7s %11d  %8.0f (%.0f-%.0f)  %14.2f  %6.2f  %6d\n", k.bin, k.surface, k.c,
			med(rs, func(r result) float64 { return r.PerSecond }), lo, hi,
			med(rs, func(r result) float64 { return r.P50Ms }), med(rs, func(r result) float64 { return r.P99Ms }), errs)
	}
}
