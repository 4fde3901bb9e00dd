// Command snapshot-bench measures snapshot save and restore: it starts a 3-node cluster
// in this process (each node a full server: store, FSM, Raft, HTTP API on loopback),
// registers N instances through concurrent API clients, then times
//
//   - save: GET /v1/snapshot from the leader into a file (roster snapshot save's path:
//     the leader's view streamed through gzip to the client), and the offline check of
//     that file (snapshot.Inspect with the state check);
//   - restore: PUT /v1/snapshot of that file to the leader, returning once a quorum
//     has installed it (upload, whole-archive check, Raft restore).
//
// and reports the archive and state sizes and memory: the process's peak RSS during
// each operation (VmHWM, reset through /proc/self/clear_refs before it; it includes the
// pages of the three state files bbolt maps) and the peak anonymous RSS (RssAnon,
// sampled every 5 ms: heap and stacks, the part that would grow if an archive were
// buffered in memory).
//
//	go run ./scripts/snapshot-bench -n 10000,100000
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/internal/procstat"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/snapshot"
)

func main() {
	var (
		counts  = flag.String("n", "10000,100000", "comma-separated instance counts")
		workers = flag.Int("workers", 64, "concurrent registering clients")
		dir     = flag.String("dir", "", "working directory (default a temporary one, removed at exit)")
		profile = flag.String("profile", "", "write heap allocation profiles before and after each restore into this directory")
		scale   = flag.Int("raft-timeout-scale", 1, "multiply Raft's heartbeat, election and leader-lease timeouts (a machine shared with other load misses heartbeats during a large restore at the defaults)")
	)
	flag.Parse()
	raftScale = *scale
	if err := run(*counts, *workers, *dir, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "snapshot-bench:", err)
		os.Exit(1)
	}
}

func run(counts string, workers int, dir, profileDir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "snapshot-bench-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	fmt.Printf("| instances | fill | state.db | archive | save | save: peak RSS | save: anon before / growth | inspect | restore | restore: peak RSS | restore: anon before / growth |\n")
	fmt.Printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-n: bad count %q", s)
		}
		if err := measure(filepath.Join(dir, strconv.Itoa(n)), n, workers, profileDir); err != nil {
			return fmt.Errorf("%d instances: %w", n, err)
		}
	}
	return nil
}

// raftScale multiplies Raft's default timeouts (-raft-timeout-scale).
var raftScale = 1

// cluster is three in-process nodes.
type cluster struct {
	servers []*server.Server
}

func startCluster(dir string) (*cluster, error) {
	var peers []raftnode.Peer
	type addrs struct{ http, raft string }
	var as []addrs
	for i := 1; i <= 3; i++ {
		a := addrs{http: freePort(), raft: freePort()}
		as = append(as, a)
		peers = append(peers, raftnode.Peer{ID: "n" + strconv.Itoa(i), Addr: a.raft})
	}
	loopbackOnly, err := healthcheck.ParsePolicy(healthcheck.LoopbackOnly, "")
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	for i, a := range as {
		srv, err := server.New(server.Config{
			NodeID:   peers[i].ID,
			DataDir:  filepath.Join(dir, peers[i].ID),
			HTTPAddr: a.http,
			RaftAddr: a.raft,
			Peers:    peers,
			Logger:   log,
			Health:   healthcheck.Config{Policy: loopbackOnly},
			Raft: server.RaftTuning{
				HeartbeatTimeout:   time.Duration(raftScale) * raftnode.DefaultHeartbeatTimeout,
				ElectionTimeout:    time.Duration(raftScale) * raftnode.DefaultElectionTimeout,
				LeaderLeaseTimeout: time.Duration(raftScale) * raftnode.DefaultLeaderLeaseTimeout,
			},
		})
		if err != nil {
			c.close()
			return nil, err
		}
		if err := srv.Start(); err != nil {
			c.close()
			return nil, err
		}
		c.servers = append(c.servers, srv)
	}
	return c, nil
}

func (c *cluster) close() {
	for _, s := range c.servers {
		_ = s.Close()
	}
}

// leader waits until every node is ready and returns the leader.
func (c *cluster) leader(ctx context.Context) (*server.Server, error) {
	for {
		var lead *server.Server
		ready := true
		for _, s := range c.servers {
			ok, _ := s.Node().Ready()
			ready = ready && ok
			if s.Node().IsLeader() {
				lead = s
			}
		}
		if ready && lead != nil {
			return lead, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("no ready leader")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

func measure(dir string, n, workers int, profileDir string) error {
	ctx := context.Background()
	c, err := startCluster(dir)
	if err != nil {
		return err
	}
	defer c.close()
	lead, err := c.leader(ctx)
	if err != nil {
		return err
	}
	cl := client.New(lead.HTTPAddr(), client.WithTimeout(time.Minute))

	start := time.Now()
	if err := fill(ctx, cl, n, workers); err != nil {
		return err
	}
	fillTime := time.Since(start)

	file := filepath.Join(dir, "backup.snap")
	var info client.SnapshotInfo
	saveTime, saveMem, err := observe(func() error {
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		info, err = cl.SaveSnapshot(ctx, f, false)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	var meta snapshot.Meta
	inspectTime, _, err := observe(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		meta, err = snapshot.Inspect(f, snapshot.ReadOptions{Dir: dir, Check: snapshot.CheckState})
		return err
	})
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if meta.Counts.Instances != n {
		return fmt.Errorf("archive holds %d instances, want %d", meta.Counts.Instances, n)
	}
	if profileDir != "" {
		if err := writeProfile(filepath.Join(profileDir, fmt.Sprintf("before-restore-%d.pprof", n))); err != nil {
			return err
		}
	}
	restoreTime, restoreMem, err := observe(func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		return cl.RestoreSnapshot(ctx, bufio.NewReaderSize(f, 256<<10))
	})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if _, resp, err := instanceCount(ctx, cl); err != nil || resp != n {
		return fmt.Errorf("after restore: %d instances, %v", resp, err)
	}
	fmt.Printf("| %d | %s | %s | %s | %s | %s | %s / +%s | %s | %s | %s | %s / +%s |\n",
		n, round(fillTime), mib(meta.Size), mib(info.Bytes), round(saveTime), mib(saveMem.hwm),
		mib(saveMem.baseAnon), mib(saveMem.growth()), round(inspectTime), round(restoreTime),
		mib(restoreMem.hwm), mib(restoreMem.baseAnon), mib(restoreMem.growth()))
	if profileDir != "" {
		if err := writeProfile(filepath.Join(profileDir, fmt.Sprintf("after-restore-%d.pprof", n))); err != nil {
			return err
		}
	}
	return nil
}

// fill registers n instances of 10 services (NONE-checked clusters, so no prober
// traffic) with three metadata entries each, through workers concurrent clients.
func fill(ctx context.Context, cl *client.Client, n, workers int) error {
	const services = 10
	for s := range services {
		if _, err := cl.UpsertCluster(ctx, "", "", svcName(s), "main", api.ClusterRequest{
			HealthCheck: &api.HealthCheckSpec{Type: "NONE"},
		}); err != nil {
			return err
		}
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		errMu  sync.Mutex
		first  error
		failed atomic.Bool
	)
	cluster := "main"
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var err error
				// A registration is idempotent: retry it across a change of leader (a
				// loaded machine can miss heartbeats during the fill).
				for attempt := 0; attempt < 10; attempt++ {
					if attempt > 0 {
						time.Sleep(200 * time.Millisecond)
					}
					_, err = cl.RegisterInstance(ctx, "", "", svcName(i%services),
						fmt.Sprintf("127.%d.%d.%d", i>>16&255, i>>8&255, i&255), 8000+i%1000, api.InstanceRequest{
							Cluster: &cluster,
							Metadata: map[string]string{
								"version": "1." + strconv.Itoa(i%7) + ".0", "zone": "zone-" + strconv.Itoa(i%3),
								"owner": "team-" + strconv.Itoa(i%13),
							},
						})
					if err == nil {
						break
					}
				}
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func svcName(i int) string { return "svc-" + strconv.Itoa(i) }

func instanceCount(ctx context.Context, cl *client.Client) (uint64, int, error) {
	total := 0
	var idx uint64
	for s := range 10 {
		resp, meta, err := cl.Instances(ctx, "", "", svcName(s), client.InstancesQuery{})
		if err != nil {
			return 0, 0, err
		}
		total += len(resp.Instances)
		idx = max(idx, meta.Index)
	}
	return idx, total, nil
}

// memory is the memory of the process around one observed operation, in bytes.
type memory struct {
	hwm      int64 // VmHWM: peak resident set during the operation
	baseAnon int64 // RssAnon just before the operation (after a GC)
	anon     int64 // highest sampled RssAnon during the operation
}

// growth is how far anonymous memory rose above its level before the operation.
func (m memory) growth() int64 { return m.anon - m.baseAnon }

// observe runs fn after a GC and a reset of the peak RSS, and returns its duration and
// the process's peak memory while it ran.
func observe(fn func() error) (time.Duration, memory, error) {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM (Linux ≥ 4.0)
	var peakAnon atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v := status("RssAnon"); v > peakAnon.Load() {
				peakAnon.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	base := status("RssAnon")
	start := time.Now()
	err := fn()
	d := time.Since(start)
	close(stop)
	<-done
	return d, memory{hwm: status("VmHWM"), baseAnon: base, anon: peakAnon.Load()}, err
}

// status reads a "kB" field of /proc/self/status, in bytes (0 if unavailable).
func status(field string) int64 {
	kb, err := procstat.StatusKiB(0, field)
	if err != nil {
		return 0
	}
	return kb << 10
}

// writeProfile writes the heap profile (allocations since start included) to path;
// compare two with go tool pprof -sample_index=alloc_space -base.
func writeProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func round(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}
