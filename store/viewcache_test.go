package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/model"
)

// cacheMetric returns the value of a read cache metric for layer from reg.
func cacheMetric(t *testing.T, reg *prometheus.Registry, name, layer string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "layer" && l.GetValue() == layer {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{layer=%q}", name, layer)
	return 0
}

func openCached(t *testing.T, size int64) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{NoSync: true, ReadCacheSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustMatchUncached reads key through the cache and from the file and fails if they differ.
func mustMatchUncached(t *testing.T, s *Store, key model.ServiceKey) uint64 {
	t.Helper()
	idx, v, err := s.ServiceView(nil, key)
	uidx, uv, uerr := s.UncachedServiceView(nil, key)
	if err != nil || uerr != nil || idx != uidx || !reflect.DeepEqual(v, uv) {
		t.Fatalf("ServiceView(%v) = %d %+v %v, uncached %d %+v %v", key, idx, v, err, uidx, uv, uerr)
	}
	return idx
}

func TestReadCache_HitsAndMissesAreCounted(t *testing.T) {
	s := openCached(t, 0)
	reg := prometheus.NewRegistry()
	mustDo(t, s.RegisterMetrics(reg))
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))

	mustMatchUncached(t, s, testKey)
	mustMatchUncached(t, s, testKey)
	mustMatchUncached(t, s, testKey)
	if h, m := cacheMetric(t, reg, "roster_read_cache_hits_total", "view"), cacheMetric(t, reg, "roster_read_cache_misses_total", "view"); h != 2 || m != 1 {
		t.Fatalf("view hits %v misses %v, want 2 and 1", h, m)
	}
	if b := cacheMetric(t, reg, "roster_read_cache_bytes", "view"); b <= 0 {
		t.Fatalf("view bytes %v, want > 0", b)
	}

	enc := func(idx uint64, v ServiceView) ([]byte, error) {
		return fmt.Appendf(nil, "%d:%d", idx, len(v.Instances)), nil
	}
	for range 3 {
		if _, b, err := s.EncodedServiceView(nil, testKey, "n", enc); err != nil || string(b) != "1:1" {
			t.Fatalf("EncodedServiceView = %q %v", b, err)
		}
	}
	if h, m := cacheMetric(t, reg, "roster_read_cache_hits_total", "encoded"), cacheMetric(t, reg, "roster_read_cache_misses_total", "encoded"); h != 2 || m != 1 {
		t.Fatalf("encoded hits %v misses %v, want 2 and 1", h, m)
	}
	if b := cacheMetric(t, reg, "roster_read_cache_bytes", "encoded"); b != float64(len("1:1")+len("n")) {
		t.Fatalf("encoded bytes %v", b)
	}

	// A write drops the view and what was encoded from it.
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.2", 80)))
	if b := cacheMetric(t, reg, "roster_read_cache_bytes", "encoded"); b != 0 {
		t.Fatalf("encoded bytes %v after a write, want 0", b)
	}
	if _, b, err := s.EncodedServiceView(nil, testKey, "n", enc); err != nil || string(b) != "2:2" {
		t.Fatalf("EncodedServiceView after a write = %q %v", b, err)
	}
	if m := cacheMetric(t, reg, "roster_read_cache_misses_total", "view"); m != 2 {
		t.Fatalf("view misses %v after a write, want 2", m)
	}
}

func TestReadCache_BlockingQueryOnAHitWakesOnChange(t *testing.T) {
	s := openCached(t, 0)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	mustMatchUncached(t, s, testKey) // fills
	hitsBefore := s.views.hits[layerView].Load()

	// A snapshot of the state before the change, restored after it.
	sn, err := s.Snapshot()
	mustDo(t, err)
	var before bytes.Buffer
	_, err = sn.WriteTo(&before)
	mustDo(t, err)
	mustDo(t, sn.Close())

	ws := NewWatchSet()
	idx, _, err := s.ServiceView(ws, testKey)
	if err != nil || idx != 1 || s.views.hits[layerView].Load() != hitsBefore+1 {
		t.Fatalf("second read: idx %d err %v, hit counted %v", idx, err, s.views.hits[layerView].Load() != hitsBefore)
	}
	woke := make(chan bool, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { woke <- ws.Wait(ctx) }()
	mustDo(t, s.UpdateInstance(2, testInstance("127.100.0.1", 80).Ref(), model.InstancePatch{Weight: new(3.0)}))
	if !<-woke {
		t.Fatal("the watch set of a cached read did not fire on the change")
	}
	if idx := mustMatchUncached(t, s, testKey); idx != 2 {
		t.Fatalf("index after the change %d, want 2", idx)
	}

	// A watch set from a hit also fires on a restore, and the restored view is served.
	ws = NewWatchSet()
	_, _, err = s.ServiceView(ws, testKey)
	mustDo(t, err)
	mustDo(t, s.Restore(&before))
	if !WatchSetFired(ws) {
		t.Fatal("the watch set of a cached read did not fire on a restore")
	}
	mustMatchUncached(t, s, testKey)
	if _, v, _ := s.ServiceView(nil, testKey); v.Instances[0].Weight != 1 {
		t.Fatalf("weight %v after restoring the state from before the change, want 1", v.Instances[0].Weight)
	}
}

func TestReadCache_EntryWhoseWatchFiredIsNotServed(t *testing.T) {
	s := openCached(t, 0)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	mustMatchUncached(t, s, testKey)
	// A watch that fired without the cache seeing the commit (the window between an
	// invalidation and the firing): the entry must not hand out its closed channel.
	s.watches.fire(map[string]struct{}{watchService(testKey): {}})
	ws := NewWatchSet()
	if _, _, err := s.ServiceView(ws, testKey); err != nil {
		t.Fatal(err)
	}
	if WatchSetFired(ws) {
		t.Fatal("a read after the watch fired got the closed channel")
	}
}

func TestReadCache_FillRacingACommitIsRefused(t *testing.T) {
	s := openCached(t, 0)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	gen := s.views.generation()
	_, v, err := s.UncachedServiceView(nil, testKey)
	mustDo(t, err)
	// A commit lands between the read and the fill.
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.2", 80)))
	s.mu.RLock()
	floor := s.floor
	s.mu.RUnlock()
	if e := s.views.fill(s.watches, testKey, 1, floor, gen, v); e != nil {
		t.Fatal("a view read before a commit was cached after it")
	}
	if idx := mustMatchUncached(t, s, testKey); idx != 2 {
		t.Fatalf("index %d, want 2", idx)
	}
}

func TestReadCache_TinyBudgetEvictsAndStaysCorrect(t *testing.T) {
	s := openCached(t, 3000)
	reg := prometheus.NewRegistry()
	mustDo(t, s.RegisterMetrics(reg))
	var keys []model.ServiceKey
	idx := uint64(0)
	for i := range 6 {
		in := testInstance("127.100.0.1", 80)
		in.Service = fmt.Sprintf("svc%d", i)
		idx++
		mustDo(t, s.RegisterInstance(idx, in))
		keys = append(keys, in.ServiceKey())
	}
	for round := range 4 {
		for _, k := range keys {
			mustMatchUncached(t, s, k)
			if u := s.views.usage(layerView) + s.views.usage(layerEncoded); u > 3000 {
				t.Fatalf("cache holds %d bytes, budget 3000", u)
			}
		}
		// Change one service each round.
		idx++
		mustDo(t, s.UpdateInstance(idx, model.InstanceRef{Namespace: testKey.Namespace, Group: testKey.Group,
			Service: keys[round].Service, IP: "127.100.0.1", Port: 80}, model.InstancePatch{Weight: new(float64(round + 2))}))
	}
	if e := cacheMetric(t, reg, "roster_read_cache_evictions_total", "view"); e == 0 {
		t.Fatal("no eviction under a budget smaller than the views read")
	}
	if b := cacheMetric(t, reg, "roster_read_cache_bytes", "view"); b > 3000 || b <= 0 {
		t.Fatalf("cache holds %v bytes, budget 3000", b)
	}
}

func TestReadCache_OffAndClosed(t *testing.T) {
	s := openCached(t, -1)
	if s.views != nil {
		t.Fatal("a negative size must turn the cache off")
	}
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	mustMatchUncached(t, s, testKey)
	mustDo(t, s.RegisterMetrics(prometheus.NewRegistry()))

	c := openCached(t, 0)
	mustDo(t, c.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	mustMatchUncached(t, c, testKey)
	mustDo(t, c.Close())
	if _, _, err := c.ServiceView(nil, testKey); !errors.Is(err, ErrClosed) {
		t.Fatalf("ServiceView after Close: %v, want ErrClosed", err)
	}
}

func TestReadCache_EncodeErrorIsNotKept(t *testing.T) {
	s := openCached(t, 0)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	boom := errors.New("boom")
	calls := 0
	enc := func(uint64, ServiceView) ([]byte, error) {
		calls++
		if calls == 1 {
			return nil, boom
		}
		return []byte("ok"), nil
	}
	if _, _, err := s.EncodedServiceView(nil, testKey, "v", enc); !errors.Is(err, boom) {
		t.Fatalf("first encode: %v", err)
	}
	for range 2 {
		if _, b, err := s.EncodedServiceView(nil, testKey, "v", enc); err != nil || string(b) != "ok" {
			t.Fatalf("EncodedServiceView = %q %v", b, err)
		}
	}
	if calls != 2 {
		t.Fatalf("encode called %d times, want 2", calls)
	}
	if _, _, err := s.EncodedServiceView(nil, model.ServiceKey{Namespace: "dev", Group: "g1", Service: "none"}, "v", enc); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing service: %v", err)
	}
}

// Readers racing a writer never get a view older than the applied index they saw
// before reading: the commit drops the cached view before it publishes its index.
func TestReadCache_ConcurrentReadsNeverPrecedeTheAppliedIndex(t *testing.T) {
	s := openCached(t, 0)
	ref := testInstance("127.100.0.1", 80).Ref()
	mustDo(t, s.Update(func(tx *Txn) error {
		if err := tx.SetAppliedIndex(1); err != nil {
			return err
		}
		return tx.RegisterInstance(1, testInstance("127.100.0.1", 80))
	}))
	const writes = 400
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				applied := s.AppliedIndex()
				ws := NewWatchSet()
				idx, v, err := s.ServiceView(ws, testKey)
				if err != nil {
					errs <- err
					return
				}
				if idx < applied || v.Service.ModifyIndex != idx || v.Instances[0].ModifyIndex != idx {
					errs <- fmt.Errorf("read index %d (instance at %d) after the applied index was %d", idx, v.Instances[0].ModifyIndex, applied)
					return
				}
			}
		}()
	}
	for i := uint64(2); i <= writes; i++ {
		mustDo(t, s.Update(func(tx *Txn) error {
			if err := tx.SetAppliedIndex(i); err != nil {
				return err
			}
			return tx.UpdateInstance(i, ref, model.InstancePatch{Weight: new(float64(i%50 + 1))})
		}))
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s.views.hits[layerView].Load() == 0 {
		t.Fatal("no read hit the cache")
	}
}
