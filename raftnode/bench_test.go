package raftnode

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// BenchmarkCluster_Failover measures, with the default timings, the time from the
// leader's shutdown to the first write committed by a new leader (one fresh 3-node
// cluster per iteration). Run with -benchtime=20x; it reports the median and p90.
func BenchmarkCluster_Failover(b *testing.B) {
	var took []time.Duration
	for i := 0; i < b.N; i++ {
		took = append(took, runFailover(b))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Milliseconds()), "p90-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}

func runFailover(b *testing.B) time.Duration {
	b.Helper()
	c := mustNewCluster(b, 3)
	defer func() {
		for _, tn := range c.nodes {
			c.stop(tn)
		}
	}()
	old := c.waitForLeader(10 * time.Second)
	mustApplyNamespace(b, old.N(), "before")
	start := time.Now()
	c.stop(old)
	wait.For(b, 10*time.Second, "a new leader's write", func() bool {
		for _, tn := range c.running() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := tn.N().Apply(ctx, fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: "after"}})
			cancel()
			if err == nil {
				return true
			}
		}
		return false
	})
	return time.Since(start)
}

// BenchmarkNode_ApplyConcurrent measures write throughput on a 3-node cluster with 256
// concurrent writers, more than the library's default group size of 64 (the Raft log
// is fsynced; the state store is not).
func BenchmarkNode_ApplyConcurrent(b *testing.B) {
	c := mustNewCluster(b, 3)
	leader := c.waitForLeader(10 * time.Second)
	const writers = 256
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				_, err := leader.N().Apply(context.Background(), fsm.UpsertNamespaceRequest{Namespace: model.Namespace{ID: fmt.Sprintf("ns-%d", i)}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
