package healthcheck

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// scanFailingSource is a Source whose scans fail after handing out failAfter instances
// (negative: never fail).
type scanFailingSource struct {
	*fakeSource
	failAfter int
}

func (s *scanFailingSource) ForEachInstanceHealth(fn func(store.InstanceHealth, *model.HealthCheck) bool) error {
	n := 0
	var errStop = errors.New("disk read failed")
	err := s.fakeSource.ForEachInstanceHealth(func(ih store.InstanceHealth, hc *model.HealthCheck) bool {
		if s.failAfter >= 0 && n == s.failAfter {
			return false
		}
		n++
		return fn(ih, hc)
	})
	if err == nil && s.failAfter >= 0 && n == s.failAfter {
		err = errStop
	}
	return err
}

// newRescanProber returns a Prober that is not running, over src, for calls to rescan
// from the test's goroutine.
func newRescanProber(t testing.TB, src Source) *Prober {
	t.Helper()
	cfg := Config{Clock: newFakeClock()}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	met, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newProber(cfg, src, &fakeApplier{}, slog.New(slog.DiscardHandler), met)
}

// targetsOf returns the prober's targets by "service/ip:port".
func targetsOf(p *Prober) map[string]*target {
	out := map[string]*target{}
	for _, st := range p.bySvc {
		for k, t := range st.byAddr {
			if k.ip != t.ref.IP || k.port != t.ref.Port || st.key != t.ref.ServiceKey() {
				panic(fmt.Sprintf("target %v filed under %v/%v", t.ref, st.key, k))
			}
			out[refString(t.ref)] = t
		}
	}
	return out
}

// A rescan makes the targets exactly the source's instances, each probed instance in
// the schedule once, and keeps the state of the instances it already knew.
func TestRescan_SchedulesEveryInstanceAndDropsTheGone(t *testing.T) {
	src := newFakeSource()
	svcs := []model.ServiceKey{testSvc, {Namespace: "public", Group: "g2", Service: "other"}}
	src.setCheck(svcs[0], model.DefaultCluster, tcpCheck(10*time.Second, 2, 3), false)
	src.setCheck(svcs[1], model.DefaultCluster, model.HealthCheck{Type: model.CheckNone}, false)
	var all []model.Instance
	for i := range 300 {
		in := inst(fmt.Sprintf("127.100.%d.%d", i/250, i%250+1), 8000+i%3, i%4 != 0)
		svc := svcs[i%2]
		in.Namespace, in.Group, in.Service = svc.Namespace, svc.Group, svc.Service
		all = append(all, src.register(in, false))
	}
	p := newRescanProber(t, src)
	now := p.cfg.Clock.Now()
	if err := p.rescan(now); err != nil {
		t.Fatal(err)
	}
	check := func(want []model.Instance) {
		t.Helper()
		got := targetsOf(p)
		if len(got) != len(want) || p.count != len(want) {
			t.Fatalf("%d targets (count %d), want %d", len(got), p.count, len(want))
		}
		scheduled := 0
		for _, in := range want {
			tg := got[refString(in.Ref())]
			if tg == nil {
				t.Fatalf("no target for %s", refString(in.Ref()))
			}
			if tg.epoch != in.CreateIndex || tg.committed != in.Healthy || tg.cluster != in.Cluster {
				t.Fatalf("target %+v for %+v", tg, in)
			}
			probed := in.Service == testSvc.Service
			if (tg.heapIdx >= 0) != probed {
				t.Fatalf("%s: scheduled = %v, want %v", refString(in.Ref()), tg.heapIdx >= 0, probed)
			}
			if probed {
				scheduled++
				if p.sched[tg.heapIdx] != tg {
					t.Fatalf("%s: schedule index out of date", refString(in.Ref()))
				}
			}
		}
		if len(p.sched) != scheduled {
			t.Fatalf("%d scheduled, want %d", len(p.sched), scheduled)
		}
	}
	check(all)

	// The instances that stay keep their target (counters, phase); gone ones are
	// dropped, new ones added.
	kept := targetsOf(p)[refString(all[0].Ref())]
	kept.st.succ = 1
	next := kept.next
	for _, in := range all[200:] {
		src.deregister(in.Ref(), false)
	}
	want := all[:200]
	for i := range 20 {
		in := inst(fmt.Sprintf("127.101.0.%d", i+1), 9000, true)
		want = append(want, src.register(in, false))
	}
	if err := p.rescan(now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	check(want)
	if tg := targetsOf(p)[refString(all[0].Ref())]; tg != kept || tg.st.succ != 1 || !tg.next.Equal(next) {
		t.Fatalf("a known instance was restarted by the rescan")
	}
}

// A rescan that fails part-way drops nothing; the next one converges.
func TestRescan_FailurePartWayDropsNothing(t *testing.T) {
	src := &scanFailingSource{fakeSource: newFakeSource(), failAfter: -1}
	src.setCheck(testSvc, model.DefaultCluster, tcpCheck(10*time.Second, 2, 3), false)
	var all []model.Instance
	for i := range 100 {
		all = append(all, src.register(inst(fmt.Sprintf("127.100.0.%d", i+1), 80, true), false))
	}
	p := newRescanProber(t, src)
	now := p.cfg.Clock.Now()
	if err := p.rescan(now); err != nil {
		t.Fatal(err)
	}
	for _, in := range all[50:] {
		src.deregister(in.Ref(), false)
	}
	changed := all[0]
	changed.Healthy = false
	changed = src.register(changed, false)

	src.failAfter = 10
	if err := p.rescan(now); err == nil {
		t.Fatal("rescan succeeded")
	}
	if n := len(targetsOf(p)); n != 100 || len(p.sched) != 100 {
		t.Fatalf("%d targets, %d scheduled after a failed rescan, want 100", n, len(p.sched))
	}
	src.failAfter = -1
	if err := p.rescan(now); err != nil {
		t.Fatal(err)
	}
	got := targetsOf(p)
	if len(got) != 50 || len(p.sched) != 50 {
		t.Fatalf("%d targets, %d scheduled, want 50", len(got), len(p.sched))
	}
	if tg := got[refString(changed.Ref())]; tg == nil || tg.committed {
		t.Fatalf("changed instance: %+v", tg)
	}
}

// BenchmarkProber_Rescan rescans 10,000 instances of a real store, as after a restore
// (EventReset): "known" with the targets in place, "first" from an empty prober, as at
// the start of a term. The allocations are the targets a first scan creates; a rescan
// of known instances allocates about one string per instance.
func BenchmarkProber_Rescan(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	const n = 10_000
	err = st.Update(func(tx *store.Txn) error {
		for i := range n {
			svc := fmt.Sprintf("svc-%d", i%10)
			if i < 10 {
				if err := tx.UpsertCluster(uint64(i+1), model.Cluster{Namespace: "public", Group: "DEFAULT_GROUP", Service: svc,
					Name: model.DefaultCluster, HealthCheck: tcpCheck(10*time.Second, 2, 3)}); err != nil {
					return err
				}
			}
			if err := tx.RegisterInstance(uint64(100+i), model.Instance{Namespace: "public", Group: "DEFAULT_GROUP", Service: svc,
				IP: fmt.Sprintf("127.1.%d.%d", i/250, i%250+1), Port: 8080, Cluster: model.DefaultCluster, Weight: 1,
				Enabled: true, Healthy: true, Metadata: map[string]string{"version": "1.2.0", "zone": "zone-1"}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("known", func(b *testing.B) {
		p := newRescanProber(b, st)
		now := p.cfg.Clock.Now()
		if err := p.rescan(now); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := p.rescan(now); err != nil || p.count != n {
				b.Fatal(p.count, err)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := newRescanProber(b, st)
			if err := p.rescan(p.cfg.Clock.Now()); err != nil || p.count != n {
				b.Fatal(p.count, err)
			}
		}
	})
}
