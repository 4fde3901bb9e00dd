package healthcheck

import (
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/testnet"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

func TestProber_SpreadsFirstProbesAcrossInterval(t *testing.T) {
	const n, interval = 200, 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 2, 3))
	e.addInstances(n, true)
	t0 := e.clk.Now()
	p, _ := e.start(t)

	rs, _ := p.Results(testSvc)
	if len(rs) != n {
		t.Fatalf("%d results, want %d", len(rs), n)
	}
	var buckets [10]int
	dueByHalf := 0
	for _, r := range rs {
		off := r.NextCheck.Sub(t0)
		if off < 0 || off >= interval {
			t.Fatalf("first probe of %s due at +%s, outside the interval", r.IP, off)
		}
		buckets[off*10/interval]++
		if off <= interval/2 {
			dueByHalf++
		}
	}
	for i, b := range buckets {
		if b == 0 {
			t.Fatalf("no first probe in tenth %d of the interval: %v", i, buckets)
		}
	}
	if dials, _, _ := e.net.stats(); dials != 0 {
		t.Fatalf("%d probes before any was due", dials)
	}

	e.clk.Advance(interval / 2)
	wait.For(t, 5*time.Second, "probes due by half the interval", func() bool {
		d, _, _ := e.net.stats()
		return d == dueByHalf
	})
	e.clk.Advance(interval / 2)
	wait.For(t, 5*time.Second, "every instance probed once", func() bool {
		d, _, _ := e.net.stats()
		return d == n
	})
}

func TestProber_KeepsPhaseAtFixedRate(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 2, 3))
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	first, _ := resultFor(p, in.IP, in.Port)
	t0 := e.clk.Now()
	due := first.NextCheck

	// Start 3s late: the next round stays on the original phase.
	e.clk.Advance(due.Sub(t0) + 3*time.Second)
	wait.For(t, 5*time.Second, "first probe", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.Outcome != ""
	})
	r, _ := resultFor(p, in.IP, in.Port)
	if !r.NextCheck.Equal(due.Add(interval)) {
		t.Fatalf("next check at %s, want %s (due + interval, without the lag)", r.NextCheck, due.Add(interval))
	}

	// Fall more than a whole interval behind: the missed round is skipped, phase kept.
	e.clk.Advance(interval + interval/2 + interval) // now = due + 3s + 25s
	wait.For(t, 5*time.Second, "second probe", func() bool {
		d, _, _ := e.net.stats()
		return d == 2
	})
	wait.For(t, 5*time.Second, "schedule after the second probe", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.NextCheck.Equal(due.Add(3 * interval))
	})
	if got := metricValue(t, p.met.skipped); got != 1 {
		t.Fatalf("skipped rounds = %v, want 1", got)
	}
	if got := metricValue(t, p.met.lag); got != 2 {
		t.Fatalf("lag histogram has %v samples, want 2", got)
	}
}

func TestProber_BoundsProbesInFlight(t *testing.T) {
	const n, limit, interval = 50, 5, 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 2, 3))
	e.cfg.MaxConcurrent = limit
	e.addInstances(n, true)
	e.net.blockDials()
	p, _ := e.start(t)

	e.clk.Advance(interval) // every instance is due
	wait.For(t, 5*time.Second, "the first probes to block", func() bool {
		_, cur, _ := e.net.stats()
		return cur == limit
	})
	if got := metricValue(t, p.met.inFlight); got != limit {
		t.Fatalf("in-flight gauge = %v, want %d", got, limit)
	}
	e.net.unblock()
	wait.For(t, 5*time.Second, "every instance probed", func() bool {
		d, _, _ := e.net.stats()
		return d == n
	})
	if _, _, maxSeen := e.net.stats(); maxSeen != limit {
		t.Fatalf("at most %d probes were in flight, want exactly the limit %d", maxSeen, limit)
	}
	wait.For(t, 5*time.Second, "in-flight gauge back to 0", func() bool {
		return metricValue(t, p.met.inFlight) == 0
	})
}

func TestProber_StartsFromCommittedHealth(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 2, 2))
	up := e.src.register(inst("127.100.0.1", 8080, false), false)  // reachable, committed unhealthy
	down := e.src.register(inst("127.100.0.2", 8080, true), false) // unreachable, committed healthy
	e.net.setDown(down.Addr(), true)
	p, _ := e.start(t)

	for _, in := range []model.Instance{up, down} {
		r, _ := resultFor(p, in.IP, in.Port)
		if r.Healthy != in.Healthy || r.Pending || r.ConsecutiveFailures != 0 || r.ConsecutiveSuccesses != 0 {
			t.Fatalf("initial view of %s = %+v, want committed health and zero counters", in.IP, r)
		}
	}
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "one probe each", func() bool {
		a, _ := resultFor(p, up.IP, up.Port)
		b, _ := resultFor(p, down.IP, down.Port)
		return a.Outcome != "" && b.Outcome != ""
	})
	e.clk.Advance(e.cfg.FlushInterval + DefaultFlushInterval)
	if pendingCount(p) != 0 || len(e.app.snapshot()) != 0 {
		t.Fatal("a single probe changed health: counters did not start at zero")
	}
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "both flips committed", func() bool {
		e.clk.Advance(DefaultFlushInterval)
		return len(e.app.updates()) == 2 && pendingCount(p) == 0
	})
	if !e.src.instance(up.Ref()).Healthy || e.src.instance(down.Ref()).Healthy {
		t.Fatal("store not updated by the transitions")
	}
}

func TestProber_RealListenerRisesAndFalls(t *testing.T) {
	const interval, timeout, rise, fall = 100 * time.Millisecond, 50 * time.Millisecond, 2, 2
	src := newFakeSource()
	app := &fakeApplier{src: src}
	src.setCheck(testSvc, model.DefaultCluster, model.HealthCheck{Type: model.CheckTCP,
		Interval: model.Duration(interval), Timeout: model.Duration(timeout), Rise: rise, Fall: fall}, false)
	ln := testnet.New(t, "127.0.0.1")
	port := ln.Port()
	in := src.register(inst("127.0.0.1", port, false), false)
	cfg := Config{FlushInterval: 20 * time.Millisecond}
	p := mustNewProber(t, cfg, src, app)
	runProber(t, p)

	wait.For(t, 5*time.Second, "healthy committed", func() bool { return src.instance(in.Ref()).Healthy })
	if got := metricValue(t, p.met.tcpOK); got < rise {
		t.Fatalf("healthy after %v successful probes, want at least %d", got, rise)
	}
	wait.For(t, 5*time.Second, "prober saw the commit", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.Healthy && !r.Pending
	})

	closed := time.Now()
	ln.Close()
	wait.For(t, 5*time.Second, "unhealthy committed", func() bool { return !src.instance(in.Ref()).Healthy })
	calls := app.snapshot()
	last := calls[len(calls)-1]
	if last.req.Updates[0].Healthy {
		t.Fatalf("last command %+v, want unhealthy", last.req)
	}
	took := last.at.Sub(closed)
	// fall probes at most one interval apart, a timeout at most, the batch window, and
	// scheduling slack for the race detector.
	limit := fall*interval + timeout + cfg.FlushInterval + 250*time.Millisecond
	if took > limit {
		t.Fatalf("detected after %s, want within %s", took, limit)
	}
	t.Logf("closed → unhealthy submitted in %s (limit %s)", took, limit)
}
