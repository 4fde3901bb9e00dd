package healthcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

// failAll marks every instance's address down.
func (e *fakeEnv) failAll(ins []model.Instance) {
	for _, in := range ins {
		e.net.setDown(in.Addr(), true)
	}
}

func pendingCount(p *Prober) int {
	rs, _ := p.Results(testSvc)
	n := 0
	for _, r := range rs {
		if r.Pending {
			n++
		}
	}
	return n
}

func TestProber_BatchesTransitionsIntoOneCommand(t *testing.T) {
	const n, interval = 100, 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	ins := e.addInstances(n, true)
	e.failAll(ins)
	p, _ := e.start(t)

	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "every transition decided", func() bool { return pendingCount(p) == n })
	if calls := e.app.snapshot(); len(calls) != 0 {
		t.Fatalf("%d commands submitted before the batch window closed", len(calls))
	}
	e.clk.Advance(e.cfg.FlushInterval)
	wait.For(t, 5*time.Second, "the batch committed", func() bool { return pendingCount(p) == 0 })
	calls := e.app.snapshot()
	if len(calls) != 1 {
		t.Fatalf("%d commands, want 1", len(calls))
	}
	if len(calls[0].req.Updates) != n {
		t.Fatalf("command carries %d updates, want %d", len(calls[0].req.Updates), n)
	}
	for _, u := range calls[0].req.Updates {
		if u.Healthy {
			t.Fatalf("update %+v, want unhealthy", u)
		}
		if want := e.src.instance(u.Ref).CreateIndex; u.Epoch != want {
			t.Fatalf("update epoch %d, want the CreateIndex %d", u.Epoch, want)
		}
	}
	// The change feed can bring the committed health before the prober has handled
	// the answer to its submission, which counts the transitions.
	wait.For(t, 5*time.Second, "transitions counted", func() bool { return metricValue(t, p.met.toUnhealthy) == n })
	rs, _ := p.Results(testSvc)
	for _, r := range rs {
		if r.Healthy {
			t.Fatalf("%s still healthy after the commit", r.IP)
		}
	}
}

func TestProber_FlushesFullBatchEarly(t *testing.T) {
	const n, interval = 300, 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	e.cfg.MaxBatch = 256
	ins := e.addInstances(n, true)
	e.failAll(ins)
	p, _ := e.start(t)

	e.clk.Advance(interval)
	// The first batch fills up and goes without the clock reaching the window's end.
	wait.For(t, 5*time.Second, "a full batch", func() bool { return len(e.app.snapshot()) >= 1 })
	if got := len(e.app.snapshot()[0].req.Updates); got != 256 {
		t.Fatalf("first command carries %d updates, want 256", got)
	}
	wait.For(t, 5*time.Second, "the rest committed", func() bool {
		e.clk.Advance(e.cfg.FlushInterval)
		return len(e.app.updates()) == n && pendingCount(p) == 0
	})
	for i, c := range e.app.snapshot() {
		if len(c.req.Updates) > 256 {
			t.Fatalf("command %d carries %d updates, more than MaxBatch", i, len(c.req.Updates))
		}
	}
}

func TestProber_StopsSubmittingAfterCancel(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	ins := e.addInstances(10, true)
	e.failAll(ins)
	p, stop := e.start(t)

	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "transitions decided", func() bool { return pendingCount(p) == 10 })
	stop() // leadership lost before the batch window closed
	e.clk.Advance(time.Minute)
	if calls := e.app.snapshot(); len(calls) != 0 {
		t.Fatalf("%d commands submitted after leadership loss", len(calls))
	}
	if _, running := p.Results(testSvc); running {
		t.Fatal("Results reports running after Run returned")
	}
}

func TestProber_DoesNotRetryAfterCancel(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	ins := e.addInstances(3, true)
	e.failAll(ins)
	entered := make(chan struct{}, 1)
	e.app.fail = func(ctx context.Context, _ int) error {
		entered <- struct{}{}
		<-ctx.Done() // commit outcome unknown until leadership is lost
		return errors.New("leadership lost while committing")
	}
	_, stop := e.start(t)
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "batch window", func() bool {
		e.clk.Advance(e.cfg.FlushInterval)
		return len(entered) == 1
	})
	stop()
	e.clk.Advance(time.Minute)
	calls := e.app.snapshot()
	if len(calls) != 1 {
		t.Fatalf("%d commands, want the one interrupted", len(calls))
	}
	if calls[0].ctxDone {
		t.Fatal("Apply called with a done context")
	}
}

func TestProber_RetriesFailedSubmitWhileLeader(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	e.app.fail = func(_ context.Context, n int) error {
		if n == 0 {
			return errors.New("raft: timed out enqueuing operation")
		}
		return nil
	}
	p, _ := e.start(t)
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "transition committed after a retry", func() bool {
		e.clk.Advance(e.cfg.FlushInterval)
		return len(e.app.snapshot()) == 2 && pendingCount(p) == 0
	})
	calls := e.app.snapshot()
	if len(calls[1].req.Updates) != 1 || calls[1].req.Updates[0] != calls[0].req.Updates[0] {
		t.Fatalf("retry carried %+v, want %+v", calls[1].req.Updates, calls[0].req.Updates)
	}
	if e.src.instance(in.Ref()).Healthy {
		t.Fatal("store not updated")
	}
	if got := metricValue(t, p.met.submitErrors); got != 1 {
		t.Fatalf("submit errors = %v, want 1", got)
	}
}

func TestProber_DropsFlapWithinWindow(t *testing.T) {
	const interval = 100 * time.Millisecond
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	e.cfg.FlushInterval = MaxFlushInterval // longer than the interval: the next round comes first
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	p, _ := e.start(t)
	r0, _ := resultFor(p, in.IP, in.Port)
	e.clk.Advance(r0.NextCheck.Sub(e.clk.Now()))
	wait.For(t, 5*time.Second, "down decided", func() bool { return pendingCount(p) == 1 })
	e.net.setDown(in.Addr(), false)
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "up again", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.ConsecutiveSuccesses == 1
	})
	e.clk.Advance(e.cfg.FlushInterval)
	wait.For(t, 5*time.Second, "batch window closed", func() bool { return queueIdle(p) })
	if calls := e.app.snapshot(); len(calls) != 0 {
		t.Fatalf("a flap undone within the window was submitted: %+v", calls)
	}
}

// queueIdle reports whether no transition is queued or being submitted.
func queueIdle(p *Prober) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.dirty) == 0 && !p.submitting
}

func TestProber_LeavesCommitOfReSpecifiedInstanceToFeed(t *testing.T) {
	const interval = 10 * time.Second
	e := newFakeEnv(tcpCheck(interval, 1, 1))
	in := e.addInstances(1, true)[0]
	e.net.setDown(in.Addr(), true)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	e.app.src = nil // the store skips the update, as it does for a NONE cluster
	e.app.fail = func(context.Context, int) error {
		entered <- struct{}{}
		<-release
		return nil
	}
	p, _ := e.start(t)
	e.clk.Advance(interval)
	wait.For(t, 5*time.Second, "submission in flight", func() bool {
		e.clk.Advance(e.cfg.FlushInterval)
		return len(entered) == 1
	})
	e.src.setCheck(testSvc, model.DefaultCluster, model.HealthCheck{Type: model.CheckNone}, true)
	wait.For(t, 5*time.Second, "NONE applied", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.CheckType == model.CheckNone
	})
	close(release)
	wait.For(t, 5*time.Second, "submission done", func() bool { return queueIdle(p) && len(e.app.snapshot()) == 1 })
	if r, _ := resultFor(p, in.IP, in.Port); !r.Healthy || r.Pending {
		t.Fatalf("the view took an update the store did not apply: %+v", r)
	}
}

func TestProber_SubmitPathChecksContext(t *testing.T) {
	app := &fakeApplier{}
	p := mustNewProber(t, Config{}, newFakeSource(), app)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ref := inst("127.100.0.1", 80, true).Ref()
	p.submitUpdates(ctx, nil, []model.HealthUpdate{{Ref: ref, Epoch: 1}}, 1)
	r := <-p.submitted
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("submission error = %v, want context.Canceled", r.err)
	}
	if calls := app.snapshot(); len(calls) != 0 {
		t.Fatalf("Apply called after the context was done: %+v", calls)
	}
}
