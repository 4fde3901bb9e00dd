package fsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// BenchmarkFSM_ApplyBatch applies batches of register commands to a store that fsyncs
// every commit (sync=commit) and to one that fsyncs on an interval, as a server does by
// default (sync=interval). One op is one batch.
func BenchmarkFSM_ApplyBatch(b *testing.B) {
	modes := []struct {
		name string
		opts store.Options
	}{
		{"commit", store.Options{}},
		{"interval", store.Options{SyncInterval: time.Second}},
	}
	for _, mode := range modes {
		for _, size := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", mode.name, size), func(b *testing.B) {
				benchApplyBatch(b, mode.opts, size)
			})
		}
	}
}

func benchApplyBatch(b *testing.B, opts store.Options, size int) {
	{
		{
			s, err := store.Open(filepath.Join(b.TempDir(), "state.db"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			f := New(s, nil)
			idx := uint64(0)
			logs := make([]*raft.Log, size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range logs {
					idx++
					in := model.Instance{
						Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: fmt.Sprintf("svc-%d", idx%100),
						IP: fmt.Sprintf("10.%d.%d.%d", idx>>16&255, idx>>8&255, idx&255), Port: 8080,
						Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
						Metadata: map[string]string{"version": "v1", "zone": "a"},
					}
					logs[j] = cmdLog(b, idx, RegisterInstanceType, RegisterInstanceRequest{Instance: in})
				}
				b.StartTimer()
				for _, r := range f.ApplyBatch(logs) {
					if err := r.(*Result).Err; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "entries/s")
		}
	}
}

// BenchmarkFSM_BatchEntry applies 64 registrations as 64 entries of one batch
// (entries=64), as one Batch entry of 64 commands (batch-command=64), and encodes the
// Batch entry (encode); the state file fsyncs on an interval, as a server's does.
func BenchmarkFSM_BatchEntry(b *testing.B) {
	const size = 64
	instance := func(idx uint64) model.Instance {
		return model.Instance{
			Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Service: fmt.Sprintf("svc-%d", idx%100),
			IP: fmt.Sprintf("127.%d.%d.%d", idx>>16&255, idx>>8&255, idx&255), Port: 8080,
			Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true,
			Metadata: map[string]string{"version": "v1", "zone": "a"},
		}
	}
	open := func(b *testing.B) *FSM {
		s, err := store.Open(filepath.Join(b.TempDir(), "state.db"), store.Options{SyncInterval: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return New(s, nil)
	}
	b.Run("entries=64", func(b *testing.B) {
		f, idx := open(b), uint64(0)
		for b.Loop() {
			logs := make([]*raft.Log, size)
			for j := range logs {
				idx++
				logs[j] = cmdLog(b, idx, RegisterInstanceType, RegisterInstanceRequest{Instance: instance(idx)})
			}
			for _, r := range f.ApplyBatch(logs) {
				if err := r.(*Result).Err; err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "writes/s")
	})
	b.Run("batch-command=64", func(b *testing.B) {
		f, idx, n := open(b), uint64(0), uint64(0)
		for b.Loop() {
			cmds := make([][]byte, size)
			for j := range cmds {
				n++
				cmds[j] = mustEncode(RegisterInstanceRequest{Instance: instance(n)})
			}
			idx++
			for _, r := range f.ApplyBatch([]*raft.Log{cmdLog(b, idx, BatchType, BatchRequest{Commands: cmds})}) {
				for _, err := range r.(*Result).Batch {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "writes/s")
	})
	b.Run("encode", func(b *testing.B) {
		cmds := make([][]byte, size)
		for j := range cmds {
			cmds[j] = mustEncode(RegisterInstanceRequest{Instance: instance(uint64(j))})
		}
		for b.Loop() {
			if _, err := Encode(BatchRequest{Commands: cmds}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
