//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RunConfig describes one round: a fresh cluster, a workload, a fault schedule and a
// check of the resulting history.
type RunConfig struct {
	// Binary is the roster binary; Dir the round's working directory.
	Binary, Dir string
	// PreviousBinary is the previous release's binary, for the previous-release fault.
	PreviousBinary string
	// Nodes is the cluster size.
	Nodes int
	// DiskBytes gives each node a file system of that size (ClusterConfig.DiskBytes;
	// the disk-full fault needs it); 0 leaves the nodes on the test's disk.
	DiskBytes int64
	// PromoteAfter is the nodes' --promote-after (default 2s, so that a server added
	// back by replace-member votes again within the fault's heal).
	PromoteAfter time.Duration
	// Seed fixes the fault schedule, the choice of nodes and the clients' choices.
	Seed uint64
	// Faults is the fault registry the schedule draws from (AllFaults by default).
	Faults func() []Fault
	// Duration 0 injects every fault once, in an order drawn from Seed; otherwise the
	// schedule draws faults at random until Duration has passed.
	Duration time.Duration
	// Workload shapes the traffic (Seed is set from the round's seed).
	Workload WorkloadConfig
	// Hold bounds how long a fault lasts: uniform in [Hold[0], Hold[1]].
	Hold [2]time.Duration
	// CheckTimeout bounds each porcupine run.
	CheckTimeout time.Duration
	// Recovery bounds the wait for a healthy cluster after each fault.
	Recovery time.Duration
	Logf     func(string, ...any)
}

// Limited is implemented by faults that may be injected only a few times per round.
type Limited interface {
	// MaxPerRound is the most injections of the fault in one round.
	MaxPerRound() int
}

// limit returns f's MaxPerRound, or 0 (no limit).
func limit(f Fault) int {
	if l, ok := f.(Limited); ok {
		return l.MaxPerRound()
	}
	return 0
}

// RunResult is what a round did and found.
type RunResult struct {
	Seed    uint64
	Faults  []string
	Report  Report
	Elapsed time.Duration
	History *History
	// Cluster is the round's cluster (already stopped), for its logs.
	Cluster *Cluster
	// CoalescedWrites is how many writes shared a Raft entry with another one, as the
	// nodes up at the end of the faults count them (roster_registry_entry_commands; a
	// restart resets a node's count): proof that the round ran with writes coalesced.
	CoalescedWrites int
}

func (c *RunConfig) fill() {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Faults == nil {
		c.Faults = AllFaults
	}
	if c.PromoteAfter == 0 {
		c.PromoteAfter = 2 * time.Second
	}
	if c.Workload.Clients == 0 {
		c.Workload = WorkloadConfig{Clients: 6, Services: 6, Ports: 3, Think: 15 * time.Millisecond}
	}
	if c.Hold == [2]time.Duration{} {
		c.Hold = [2]time.Duration{1500 * time.Millisecond, 3 * time.Second}
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = time.Minute
	}
	if c.Recovery == 0 {
		c.Recovery = 30 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Run runs one round. An error means the round could not be carried out or the
// cluster did not recover from a fault (a liveness failure); a safety violation is
// reported in the result's Report.
func Run(ctx context.Context, cfg RunConfig) (res RunResult, err error) {
	cfg.fill()
	start := time.Now()
	res.Seed = cfg.Seed
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	cfg.Workload.Seed = rng.Uint64()
	logf := cfg.Logf

	c, err := StartCluster(ClusterConfig{Binary: cfg.Binary, Dir: cfg.Dir, Nodes: cfg.Nodes,
		DiskBytes: cfg.DiskBytes, PromoteAfter: cfg.PromoteAfter, Logf: logf})
	if err != nil {
		return res, err
	}
	res.Cluster = c
	defer func() {
		if err != nil {
			// Every goroutine's stack in the node logs (copied into the artifacts), to
			// tell what a node that does not recover is waiting for.
			c.DumpStacks()
		}
		c.Close()
	}()
	h := NewHistory()
	res.History = h
	if _, err := c.WaitHealthy(ctx, cfg.Recovery); err != nil {
		return res, fmt.Errorf("new cluster: %w", err)
	}
	w := NewWorkload(cfg.Workload, c, h, logf)
	if err := w.Setup(ctx); err != nil {
		return res, fmt.Errorf("workload setup: %w", err)
	}
	env := &Env{Cluster: c, History: h, Workload: w, Rand: rng, TempDir: filepath.Join(cfg.Dir, "scratch"), PreviousBinary: cfg.PreviousBinary, Logf: logf}
	if err := os.MkdirAll(env.TempDir, 0o755); err != nil {
		return res, err
	}

	wctx, stopWorkload := context.WithCancel(ctx)
	workloadDone := make(chan struct{})
	go func() {
		defer close(workloadDone)
		w.Run(wctx)
	}()
	defer func() {
		stopWorkload()
		<-workloadDone
	}()

	sleep := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }

	if err := sleep(500 * time.Millisecond); err != nil {
		return res, err
	}
	registry := cfg.Faults()
	order := rng.Perm(len(registry))
	used := map[string]int{}
	for i := 0; ; i++ {
		var f Fault
		if cfg.Duration == 0 {
			if i == len(order) {
				break
			}
			f = registry[order[i]]
		} else {
			if time.Since(start) >= cfg.Duration {
				break
			}
			for f == nil || (limit(f) > 0 && used[f.Name()] >= limit(f)) {
				f = cfg.Faults()[rng.IntN(len(registry))]
			}
		}
		used[f.Name()]++
		if err := sleep(between(300*time.Millisecond, 800*time.Millisecond)); err != nil {
			return res, err
		}
		res.Faults = append(res.Faults, f.Name())
		if err := f.Inject(ctx, env); err != nil {
			return res, fmt.Errorf("inject %s: %w", f.Name(), err)
		}
		if err := sleep(between(cfg.Hold[0], cfg.Hold[1])); err != nil {
			return res, err
		}
		if err := f.Heal(ctx, env); err != nil {
			return res, fmt.Errorf("heal %s: %w", f.Name(), err)
		}
		healed := time.Now()
		l, err := c.WaitHealthy(ctx, cfg.Recovery)
		if err != nil {
			return res, fmt.Errorf("after %s: %w", f.Name(), err)
		}
		logf("healed %s; healthy again after %s, leader %s", f.Name(), time.Since(healed).Round(time.Millisecond), l.ID)
	}
	if err := sleep(time.Second); err != nil {
		return res, err
	}
	res.CoalescedWrites = c.CoalescedWrites(ctx)
	stopWorkload()
	<-workloadDone
	if err := w.FinalReads(ctx); err != nil {
		return res, fmt.Errorf("final reads: %w", err)
	}
	if err := w.ClientBug(); err != nil {
		return res, fmt.Errorf("workload: %w", err)
	}
	if err := w.Converge(ctx); err != nil {
		return res, err
	}
	if n := h.ResolveUndelivered(c.Net.Delivered); n > 0 {
		logf("%d unknown outcomes resolved as failed: their forwarded requests never reached another node", n)
	}
	res.Report = Check(h, cfg.CheckTimeout)
	res.Elapsed = time.Since(start)
	logf("round seed %d: faults %s; %s; %s", cfg.Seed, strings.Join(res.Faults, ","), res.Report, res.Elapsed.Round(time.Millisecond))
	return res, nil
}
