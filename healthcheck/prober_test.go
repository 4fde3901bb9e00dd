package healthcheck

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// fakeEnv is a prober on a fake source, applier, network and clock.
type fakeEnv struct {
	src *fakeSource
	app *fakeApplier
	net *fakeNet
	clk *clock.Manual
	cfg Config
}

func newFakeEnv(hc model.HealthCheck) *fakeEnv {
	e := &fakeEnv{src: newFakeSource(), net: newFakeNet(), clk: newFakeClock()}
	e.app = &fakeApplier{src: e.src}
	e.src.setCheck(testSvc, model.DefaultCluster, hc, false)
	e.cfg = Config{Clock: e.clk, Dial: e.net.dial, FlushInterval: DefaultFlushInterval}
	return e
}

// addInstances registers n instances 10.0.x.y:8080 and returns them.
func (e *fakeEnv) addInstances(n int, healthy bool) []model.Instance {
	out := make([]model.Instance, n)
	for i := range out {
		out[i] = e.src.register(inst("127.100."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250+1), 8080, healthy), false)
	}
	return out
}

func (e *fakeEnv) start(t *testing.T) (*Prober, func()) {
	t.Helper()
	p := mustNewProber(t, e.cfg, e.src, e.app)
	return p, runProber(t, p)
}

func TestProber_DiscardsResultOfRemovedInstance(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	e.net.blockDials()
	p, _ := e.start(t)

	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "probe in flight", func() bool { _, cur, _ := e.net.stats(); return cur == 1 })
	e.src.deregister(in.Ref(), true)
	wait.For(t, 5*time.Second, "instance dropped", func() bool { _, ok := resultFor(p, in.IP, in.Port); return !ok })
	e.net.unblock()
	wait.For(t, 5*time.Second, "the late result", func() bool { return metricValue(t, p.met.discarded) == 1 })
	e.clk.Advance(e.cfg.FlushInterval + DefaultFlushInterval)
	if n := pendingCount(p); n != 0 {
		t.Fatalf("%d transitions pending", n)
	}
	if calls := e.app.snapshot(); len(calls) != 0 {
		t.Fatalf("%d commands for a removed instance", len(calls))
	}
}

func TestProber_DiscardsResultOfPreviousEpoch(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	old := e.addInstances(1, true)[0]
	e.net.setDown(old.Addr(), true)
	e.net.blockDials()
	p, _ := e.start(t)

	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "probe in flight", func() bool { _, cur, _ := e.net.stats(); return cur == 1 })
	// Deregistered and registered again: a new epoch.
	e.src.deregister(old.Ref(), false)
	cur := e.src.register(inst(old.IP, old.Port, true), true)
	if cur.CreateIndex == old.CreateIndex {
		t.Fatal("fake source kept the epoch")
	}
	wait.For(t, 5*time.Second, "new epoch seen", func() bool {
		r, _ := resultFor(p, old.IP, old.Port)
		return r.Epoch == cur.CreateIndex
	})
	e.net.unblock()
	wait.For(t, 5*time.Second, "the late result", func() bool { return metricValue(t, p.met.discarded) == 1 })
	r, _ := resultFor(p, old.IP, old.Port)
	if r.ConsecutiveFailures != 0 || r.Outcome != "" || r.Pending || !r.Healthy {
		t.Fatalf("new epoch inherited the old probe: %+v", r)
	}
}

func TestProber_ReschedulesOnClusterChange(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 2, 3))
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	p, _ := e.start(t)

	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "first failure counted", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.ConsecutiveFailures == 1
	})

	// A probe of the old spec is in flight when the spec changes: its result is discarded.
	e.net.blockDials()
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "probe in flight", func() bool { _, cur, _ := e.net.stats(); return cur == 1 })
	hc := model.HealthCheck{Type: model.CheckHTTP, Path: "/hz", Port: 9000, Interval: model.Duration(20 * time.Second),
		Timeout: model.Duration(time.Second), Rise: 1, Fall: 2}
	now := e.clk.Now()
	e.src.setCheck(testSvc, model.DefaultCluster, hc, true)
	wait.For(t, 5*time.Second, "new spec applied", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.CheckType == model.CheckHTTP
	})
	e.net.unblock()
	wait.For(t, 5*time.Second, "the old spec's result discarded", func() bool {
		return metricValue(t, p.met.discarded) == 1
	})
	r, _ := resultFor(p, in.IP, in.Port)
	if r.ConsecutiveFailures != 0 || r.Outcome != "" {
		t.Fatalf("counters not reset: %+v", r)
	}
	if r.Interval != 20*time.Second || r.Fall != 2 || r.Target != "http://127.100.0.1:9000/hz" {
		t.Fatalf("spec not applied: %+v", r)
	}
	if r.NextCheck.Before(now) || !r.NextCheck.Before(now.Add(20*time.Second)) {
		t.Fatalf("next check %s not within the new interval from %s", r.NextCheck, now)
	}

	// A change that leaves the spec as it is (metadata) keeps the counters.
	e.clk.Advance(20 * time.Second)
	wait.For(t, 5*time.Second, "failure under the new spec", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.ConsecutiveFailures == 1
	})
	e.src.setCheck(testSvc, model.DefaultCluster, hc, true)
	marker := e.src.register(inst("127.109.9.9", 1, true), true)
	wait.For(t, 5*time.Second, "events processed", func() bool { _, ok := resultFor(p, marker.IP, marker.Port); return ok })
	if r, _ := resultFor(p, in.IP, in.Port); r.ConsecutiveFailures != 1 {
		t.Fatalf("an unchanged spec reset the counters: %+v", r)
	}

	// Switching to NONE stops probing.
	e.src.setCheck(testSvc, model.DefaultCluster, model.HealthCheck{Type: model.CheckNone}, true)
	wait.For(t, 5*time.Second, "NONE applied", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.CheckType == model.CheckNone
	})
	dials, _, _ := e.net.stats()
	e.clk.Advance(time.Minute)
	marker2 := e.src.register(inst("127.109.9.10", 1, true), true)
	wait.For(t, 5*time.Second, "events processed", func() bool { _, ok := resultFor(p, marker2.IP, marker2.Port); return ok })
	if d, _, _ := e.net.stats(); d != dials {
		t.Fatalf("a NONE cluster was probed %d times", d-dials)
	}
}

func TestProber_LearnsSpecOfClusterWithoutInstances(t *testing.T) {
	e := newFakeEnv(tcpCheck(10*time.Second, 2, 3))
	// The cluster exists with a NONE spec but had no instances at the scan.
	e.src.setCheck(testSvc, "manual", model.HealthCheck{Type: model.CheckNone}, false)
	p, _ := e.start(t)
	in := inst("127.100.0.7", 80, true)
	in.Cluster = "manual"
	e.src.register(in, true)
	wait.For(t, 5*time.Second, "instance seen", func() bool { _, ok := resultFor(p, in.IP, in.Port); return ok })
	if r, _ := resultFor(p, in.IP, in.Port); r.CheckType != model.CheckNone {
		t.Fatalf("instance of a NONE cluster scheduled as %s", r.CheckType)
	}
}

func TestProber_RescansOnReset(t *testing.T) {
	e := newFakeEnv(tcpCheck(10*time.Second, 2, 3))
	a := e.src.register(inst("127.100.0.1", 80, true), false)
	p, _ := e.start(t)
	// Changes whose events were dropped, then the reset.
	e.src.deregister(a.Ref(), false)
	b := e.src.register(inst("127.100.0.2", 80, false), false)
	e.src.emit(store.Event{Kind: store.EventReset})
	wait.For(t, 5*time.Second, "rescan", func() bool {
		_, hasA := resultFor(p, a.IP, a.Port)
		rb, hasB := resultFor(p, b.IP, b.Port)
		return !hasA && hasB && !rb.Healthy
	})
}

func TestProber_RetriesRescanAfterError(t *testing.T) {
	e := newFakeEnv(tcpCheck(10*time.Second, 2, 3))
	p, _ := e.start(t)
	e.src.mu.Lock()
	e.src.scanErr = errors.New("store closed")
	e.src.mu.Unlock()
	e.src.emit(store.Event{Kind: store.EventReset})
	wait.For(t, 5*time.Second, "failed rescan", func() bool {
		e.src.mu.Lock()
		defer e.src.mu.Unlock()
		return e.src.scans == 2
	})
	b := e.src.register(inst("127.100.0.2", 80, true), false)
	e.src.mu.Lock()
	e.src.scanErr = nil
	e.src.mu.Unlock()
	wait.For(t, 5*time.Second, "rescan retried", func() bool {
		e.clk.Advance(100 * time.Millisecond)
		_, ok := resultFor(p, b.IP, b.Port)
		return ok
	})
}

func TestProber_FollowsCommittedHealthFromFeed(t *testing.T) {
	e := newFakeEnv(tcpCheck(10*time.Second, 2, 3))
	a := e.src.register(inst("127.100.0.1", 80, true), false)
	p, _ := e.start(t)

	changed := a
	changed.Healthy = false
	changed.ModifyIndex = a.ModifyIndex + 10
	e.src.emit(store.Event{Kind: store.EventInstanceUpsert, Instance: changed, Ref: a.Ref()})
	wait.For(t, 5*time.Second, "committed health followed", func() bool {
		r, _ := resultFor(p, a.IP, a.Port)
		return !r.Healthy
	})
	if r, _ := resultFor(p, a.IP, a.Port); r.Pending {
		t.Fatalf("external change seen as a pending transition: %+v", r)
	}
	// A replayed older event does not roll the view back.
	e.src.emit(store.Event{Kind: store.EventInstanceUpsert, Instance: a, Ref: a.Ref()})
	marker := e.src.register(inst("127.109.9.9", 1, true), true)
	wait.For(t, 5*time.Second, "events processed", func() bool { _, ok := resultFor(p, marker.IP, marker.Port); return ok })
	if r, _ := resultFor(p, a.IP, a.Port); r.Healthy {
		t.Fatal("a stale event rolled the committed health back")
	}
}

func TestProber_IgnoresReplayedDeleteOfEarlierEpoch(t *testing.T) {
	e := newFakeEnv(tcpCheck(10*time.Second, 2, 3))
	e.src.register(inst("127.100.0.1", 80, true), false) // epoch 2
	e.src.deregister(inst("127.100.0.1", 80, true).Ref(), false)
	cur := e.src.register(inst("127.100.0.1", 80, true), false) // a later epoch
	p, _ := e.start(t)

	old := cur
	old.CreateIndex = 2
	e.src.emit(store.Event{Kind: store.EventInstanceDelete, Ref: cur.Ref(), Instance: old})
	marker := e.src.register(inst("127.109.9.9", 1, true), true)
	wait.For(t, 5*time.Second, "events processed", func() bool { _, ok := resultFor(p, marker.IP, marker.Port); return ok })
	if r, ok := resultFor(p, cur.IP, cur.Port); !ok || r.Epoch != cur.CreateIndex {
		t.Fatalf("a replayed delete of epoch 2 removed epoch %d: %+v", cur.CreateIndex, r)
	}
	e.src.emit(store.Event{Kind: store.EventInstanceDelete, Ref: cur.Ref(), Instance: cur})
	wait.For(t, 5*time.Second, "instance dropped", func() bool { _, ok := resultFor(p, cur.IP, cur.Port); return !ok })
}
