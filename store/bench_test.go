package store

import (
	"fmt"
	"testing"

	"github.com/rosterhq/roster/model"
)

// mustService100 returns a store holding one service with 100 instances.
func mustService100(b *testing.B) *Store {
	b.Helper()
	s := mustNewStore(b)
	mustDo(b, s.Update(func(tx *Txn) error {
		for i := range 100 {
			in := testInstance(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 8080)
			in.Metadata = map[string]string{"version": "v1.2.3", "zone": "eu-west-1a", "weightClass": "standard"}
			if err := tx.RegisterInstance(uint64(i+1), in); err != nil {
				return err
			}
		}
		return nil
	}))
	return s
}

// BenchmarkStore_ReadService100 reads a 100-instance service, as a discovery query does.
func BenchmarkStore_ReadService100(b *testing.B) {
	s := mustService100(b)
	b.Run("Instances", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, ins, err := s.Instances(nil, testKey)
			if err != nil || len(ins) != 100 {
				b.Fatal(len(ins), err)
			}
		}
	})
	b.Run("InstancesWatched", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, ins, err := s.Instances(NewWatchSet(), testKey)
			if err != nil || len(ins) != 100 {
				b.Fatal(len(ins), err)
			}
		}
	})
	b.Run("ServiceView", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, v, err := s.ServiceView(nil, testKey)
			if err != nil || len(v.Instances) != 100 {
				b.Fatal(err)
			}
		}
	})
	b.Run("UncachedServiceView", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, v, err := s.UncachedServiceView(nil, testKey)
			if err != nil || len(v.Instances) != 100 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStore_ServiceViewParallel reads a 100-instance service from GOMAXPROCS*128
// goroutines at once (256 on 2 cores), each read with a watch set as a blocking query
// has, through the read cache and bypassing it: the contended read path.
func BenchmarkStore_ServiceViewParallel(b *testing.B) {
	s := mustService100(b)
	for _, bc := range []struct {
		name string
		read func(*WatchSet, model.ServiceKey) (uint64, ServiceView, error)
	}{
		{"cached", s.ServiceView},
		{"uncached", s.UncachedServiceView},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(128)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, v, err := bc.read(NewWatchSet(), testKey)
					if err != nil || len(v.Instances) != 100 {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
