package raftnode

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// BenchmarkFollowerApplyLag measures how long after the leader acknowledged a write
// each follower has applied it: one writer, one write at a time, and the next write
// only once both followers applied the previous one, so no later write carries the
// commit index (the case of a write followed by a pause). Run with -benchtime=500x or
// more; it reports percentiles over every (write, follower) pair.
func BenchmarkFollowerApplyLag(b *testing.B) {
	for _, v := range propagationVariants {
		b.Run(v.name, func(b *testing.B) { runFollowerApplyLag(b, v.mod) })
	}
}

// propagationVariants are the ways of getting the commit index to followers compared:
// the library alone at two CommitTimeouts, and the commit notifier.
var propagationVariants = []struct {
	name string
	mod  func(*Config)
}{
	{"library/commit=5ms", func(c *Config) { c.noCommitNotify = true }},
	{"library/commit=1ms", func(c *Config) { c.noCommitNotify, c.CommitTimeout = true, time.Millisecond }},
	{"notify/commit=5ms", func(c *Config) {}},
	{"notify/commit=50ms", func(c *Config) { c.CommitTimeout = 50 * time.Millisecond }},
}

func runFollowerApplyLag(b *testing.B, mod func(*Config)) {
	c := newTestCluster(b, 3, true)
	c.mod = mod
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader := c.waitForLeader(10 * time.Second)
	followers := c.followers(leader)
	ctx := context.Background()
	lags := make([]time.Duration, 0, 2*b.N)
	writes := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		idx, err := leader.N().Apply(ctx, fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: fmt.Sprintf("lag-%d", i)}})
		if err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		writes = append(writes, acked.Sub(start))
		var wg sync.WaitGroup
		for _, f := range followers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var lag time.Duration
				if f.sm.AppliedIndex() < idx {
					wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := f.sm.WaitApplied(wctx, idx)
					cancel()
					if err != nil {
						b.Errorf("%s: wait for index %d: %v", f.id, idx, err)
						return
					}
					lag = time.Since(acked)
				}
				mu.Lock()
				lags = append(lags, lag)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	reportPercentiles(b, lags, "lag")
	reportPercentiles(b, writes, "write")
	_, _, notifies := leader.N().notify.counts()
	b.ReportMetric(float64(notifies)/float64(b.N), "notifies/write")
}

// idleWindow is how long BenchmarkClusterIdle measures an idle cluster.
const idleWindow = 10 * time.Second

// BenchmarkClusterIdle measures what an idle 3-node cluster costs: the AppendEntries
// the leader sends one follower per second (heartbeats apart) and the CPU of the whole
// process (three nodes) over idleWindow. Run with -benchtime=1x.
func BenchmarkClusterIdle(b *testing.B) {
	for _, v := range propagationVariants {
		b.Run(v.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runClusterIdle(b, v.mod)
			}
		})
	}
}

func runClusterIdle(b *testing.B, mod func(*Config)) {
	c := newTestCluster(b, 3, true)
	c.mod = mod
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	defer func() {
		for _, tn := range c.nodes {
			c.stop(tn)
		}
	}()
	leader := c.waitForLeader(10 * time.Second)
	// The followers' member records are the cluster's last writes of its own.
	wait.For(b, 10*time.Second, "every member record", func() bool {
		for _, tn := range c.nodes {
			if _, ok := leader.st.Member(tn.id); !ok {
				return false
			}
		}
		return true
	})
	idx := mustApplyNamespace(b, leader.N(), "idle")
	for _, f := range c.followers(leader) {
		if err := f.sm.WaitApplied(ctxTimeout(b, 10*time.Second), idx); err != nil {
			b.Fatal(err)
		}
	}
	a0, h0, n0 := leader.N().notify.counts()
	cpu0 := processCPU(b)
	start := time.Now()
	// The measurement window: the cluster is left alone, nothing is waited for.
	<-time.After(idleWindow)
	secs := time.Since(start).Seconds()
	cpu := (processCPU(b) - cpu0).Seconds()
	a1, h1, n1 := leader.N().notify.counts()
	followers := float64(len(c.followers(leader)))
	b.ReportMetric(float64(a1-a0-(h1-h0))/secs/followers, "appends/s/follower")
	b.ReportMetric(float64(h1-h0)/secs/followers, "heartbeats/s/follower")
	b.ReportMetric(float64(n1-n0)/secs/followers, "notifies/s/follower")
	b.ReportMetric(100*cpu/secs, "cpu-%")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPercentiles reports the p50, p90, p99 and maximum of d in milliseconds.
func reportPercentiles(b *testing.B, d []time.Duration, name string) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), name+"-p50-ms")
	b.ReportMetric(at(0.90), name+"-p90-ms")
	b.ReportMetric(at(0.99), name+"-p99-ms")
	b.ReportMetric(float64(d[len(d)-1].Microseconds())/1000, name+"-max-ms")
}
