package healthcheck

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

const (
	dInterval = 10 * time.Second
	dAfter    = time.Minute
)

// newDeregEnv is a fake environment whose cluster probes every 10 s with rise and fall
// 1 and deregisters instances unhealthy for a minute.
func newDeregEnv() *fakeEnv {
	hc := tcpCheck(dInterval, 1, 1)
	hc.DeregisterAfter = model.Duration(dAfter)
	return newFakeEnv(hc)
}

// advanceTo moves the fake clock to at.
func (e *fakeEnv) advanceTo(at time.Time) { e.clk.Advance(at.Sub(e.clk.Now())) }

// goUnhealthy takes a healthy instance down and returns the committed time it became
// unhealthy, which must be the leader's clock when it submitted the transition.
func (e *fakeEnv) goUnhealthy(t *testing.T, p *Prober, in model.Instance) int64 {
	t.Helper()
	e.net.setDown(in.Addr(), true)
	e.clk.Advance(dInterval)
	wait.For(t, 5*time.Second, "unhealthy decided", func() bool { r, _ := resultFor(p, in.IP, in.Port); return r.Pending })
	e.clk.Advance(e.cfg.FlushInterval)
	submitted := e.clk.Now().UnixMilli()
	wait.For(t, 5*time.Second, "unhealthy committed", func() bool { return !e.src.instance(in.Ref()).Healthy })
	since := e.src.instance(in.Ref()).UnhealthySince
	if since != submitted {
		t.Fatalf("unhealthySince %d, want the leader's clock at submission %d", since, submitted)
	}
	calls := e.app.healthCalls()
	if last := calls[len(calls)-1]; last.cmdAt != submitted {
		t.Fatalf("SetHealthAt carried At %d, want %d", last.cmdAt, submitted)
	}
	return since
}

// probeRound advances the clock by one interval and waits for that round's probe.
func (e *fakeEnv) probeRound(t *testing.T, p *Prober) {
	t.Helper()
	before := metricValue(t, p.met.tcpFail) + metricValue(t, p.met.tcpOK)
	e.clk.Advance(dInterval)
	wait.For(t, 5*time.Second, "a probe round", func() bool {
		return metricValue(t, p.met.tcpFail)+metricValue(t, p.met.tcpOK) > before
	})
}

func present(e *fakeEnv, in model.Instance) bool {
	return e.src.instance(in.Ref()).CreateIndex == in.CreateIndex
}

func TestProber_DeregistersOnceAfterTheDuration(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	since := e.goUnhealthy(t, p, in)
	deadline := time.UnixMilli(since).Add(dAfter)

	for e.clk.Now().Before(deadline) {
		e.probeRound(t, p)
	}
	wait.For(t, 5*time.Second, "deregistered", func() bool { return !present(e, in) })
	calls := e.app.deregCalls()
	if len(calls) != 1 {
		t.Fatalf("%d AutoDeregister commands, want 1", len(calls))
	}
	d := calls[0].dereg
	if d.Instance.Ref != in.Ref() || d.Instance.Epoch != in.CreateIndex || d.Instance.UnhealthySince != since {
		t.Fatalf("AutoDeregister %+v, want epoch %d unhealthy since %d", d, in.CreateIndex, since)
	}
	if at := time.UnixMilli(d.At); at.Before(deadline) {
		t.Fatalf("submitted at %s, before the deadline %s", at, deadline)
	}
	wait.For(t, 5*time.Second, "counted", func() bool { return metricValue(t, p.met.autoDeregs) == 1 })
	if _, ok := resultFor(p, in.IP, in.Port); ok {
		t.Fatal("the prober still tracks the deregistered instance")
	}
	// Much later, nothing more.
	e.clk.Advance(3 * dAfter)
	e.clk.Advance(dInterval)
	if n := len(e.app.deregCalls()); n != 1 {
		t.Fatalf("%d AutoDeregister commands, want 1", n)
	}
}

func TestProber_DeregistersAtTheDeadlineNotBefore(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	since := e.goUnhealthy(t, p, in)
	deadline := time.UnixMilli(since).Add(dAfter)
	wait.For(t, 5*time.Second, "the deadline in the results", func() bool {
		r, _ := resultFor(p, in.IP, in.Port)
		return r.DeregisterAt.Equal(deadline)
	})

	// Probe rounds up to just before the deadline: the instance stays.
	for e.clk.Now().Add(dInterval).Before(deadline) {
		e.probeRound(t, p)
		if !present(e, in) {
			t.Fatalf("deregistered at %s, before the deadline %s", e.clk.Now(), deadline)
		}
	}
	// The deregistration alarm fires at the deadline itself, between probe rounds.
	e.advanceTo(deadline)
	wait.For(t, 5*time.Second, "deregistered at the deadline", func() bool { return !present(e, in) })
	if got := time.UnixMilli(e.app.deregCalls()[0].dereg.At); !got.Equal(deadline) {
		t.Fatalf("decided at %s, want the deadline %s", got, deadline)
	}
}

func TestProber_NeverDeregistersAHealthyInstance(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	for range 3 * int(dAfter/dInterval) {
		e.probeRound(t, p)
	}
	if !present(e, in) || len(e.app.deregCalls()) != 0 {
		t.Fatalf("healthy instance deregistered: %+v", e.app.deregCalls())
	}
}

func TestProber_FlapRestartsTheTimer(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	first := e.goUnhealthy(t, p, in)

	// Half-way, it answers again: healthy is committed and the time cleared.
	e.advanceTo(time.UnixMilli(first).Add(dAfter / 2))
	e.net.setDown(in.Addr(), false)
	e.probeRound(t, p)
	e.clk.Advance(e.cfg.FlushInterval)
	wait.For(t, 5*time.Second, "healthy committed", func() bool {
		cur := e.src.instance(in.Ref())
		return cur.Healthy && cur.UnhealthySince == 0
	})
	second := e.goUnhealthy(t, p, in)
	if second <= first {
		t.Fatalf("second unhealthy period since %d, not after %d", second, first)
	}
	// The first deadline passes: kept.
	for e.clk.Now().Before(time.UnixMilli(first).Add(dAfter + dInterval)) {
		e.probeRound(t, p)
		if !present(e, in) {
			t.Fatalf("deregistered at %s on the first period's deadline", e.clk.Now())
		}
	}
	// The second one's deadline deregisters it.
	e.advanceTo(time.UnixMilli(second).Add(dAfter))
	wait.For(t, 5*time.Second, "deregistered", func() bool { return !present(e, in) })
	calls := e.app.deregCalls()
	if len(calls) != 1 || calls[0].dereg.Instance.UnhealthySince != second {
		t.Fatalf("AutoDeregister commands %+v, want one for the period since %d", calls, second)
	}
}

func TestProber_NewLeaderKeepsTheCommittedDeadline(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, stop := e.start(t)
	since := e.goUnhealthy(t, p, in)
	deadline := time.UnixMilli(since).Add(dAfter)
	e.advanceTo(time.UnixMilli(since).Add(dAfter / 2))
	stop() // leadership lost half-way

	// The next leader starts from the committed state.
	p2, _ := e.start(t)
	for e.clk.Now().Add(dInterval).Before(deadline) {
		e.probeRound(t, p2)
		if !present(e, in) {
			t.Fatalf("the new leader deregistered at %s, before the deadline %s", e.clk.Now(), deadline)
		}
	}
	e.advanceTo(deadline)
	wait.For(t, 5*time.Second, "deregistered at the original deadline", func() bool { return !present(e, in) })
	calls := e.app.deregCalls()
	if len(calls) != 1 || !time.UnixMilli(calls[0].dereg.At).Equal(deadline) {
		t.Fatalf("AutoDeregister commands %+v, want one at %s", calls, deadline)
	}
}

func TestProber_RecordsTheTimeOfAnInstanceRegisteredUnhealthy(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, false)[0]
	e.net.setDown(in.Addr(), true)
	p, _ := e.start(t)
	e.clk.Advance(e.cfg.FlushInterval)
	stamped := e.clk.Now().UnixMilli()
	wait.For(t, 5*time.Second, "time recorded", func() bool { return e.src.instance(in.Ref()).UnhealthySince == stamped })
	if got := metricValue(t, p.met.toUnhealthy); got != 0 {
		t.Fatalf("recording the time counted %v transitions", got)
	}
	e.advanceTo(time.UnixMilli(stamped).Add(dAfter))
	wait.For(t, 5*time.Second, "deregistered", func() bool { return !present(e, in) })
}

func TestProber_RefusedDeregistrationIsNotRetried(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	since := e.goUnhealthy(t, p, in)
	// Registered again just before the deadline, with the feed lagging: the command
	// carries the old epoch and the state machine refuses it.
	e.src.deregister(in.Ref(), false)
	again := e.src.register(inst(in.IP, in.Port, true), false)
	e.advanceTo(time.UnixMilli(since).Add(dAfter))
	wait.For(t, 5*time.Second, "a refused command", func() bool { return len(e.app.deregCalls()) == 1 })
	e.clk.Advance(maxRetryBackoff)
	e.clk.Advance(maxRetryBackoff)
	if n := len(e.app.deregCalls()); n != 1 {
		t.Fatalf("%d AutoDeregister commands, want 1", n)
	}
	if !present(e, again) {
		t.Fatal("the new registration was removed")
	}
	if got := metricValue(t, p.met.autoDeregs); got != 0 {
		t.Fatalf("counted %v deregistrations", got)
	}
}

// An instance the prober has decided healthy again is not deregistered while that
// transition waits to be committed, even past the deadline.
func TestProber_KeepsAnInstanceDecidedHealthyButNotCommitted(t *testing.T) {
	e := newDeregEnv()
	in := e.addInstances(1, true)[0]
	p, _ := e.start(t)
	since := e.goUnhealthy(t, p, in)
	deadline := time.UnixMilli(since).Add(dAfter)
	// Every submission of the healthy transition fails from now on.
	e.app.mu.Lock()
	failFrom := len(e.app.calls)
	e.app.fail = func(_ context.Context, n int) error {
		if n >= failFrom {
			return errors.New("no quorum")
		}
		return nil
	}
	e.app.mu.Unlock()
	e.advanceTo(deadline.Add(-dInterval - time.Millisecond))
	e.net.setDown(in.Addr(), false)
	e.probeRound(t, p) // decided healthy in the last interval before the deadline
	wait.For(t, 5*time.Second, "healthy decided", func() bool { r, _ := resultFor(p, in.IP, in.Port); return r.Pending })
	e.advanceTo(deadline.Add(dInterval / 2))
	e.probeRound(t, p)
	if calls := e.app.deregCalls(); len(calls) != 0 {
		t.Fatalf("deregistered an instance decided healthy: %+v", calls)
	}
	if !present(e, in) {
		t.Fatal("instance gone")
	}
}

// flakyDereg fails AutoDeregister calls as told: before applying (not committed) or
// after (committed, but the leader did not learn it).
type flakyDereg struct {
	*fakeApplier
	mu    sync.Mutex
	modes []string // one per AutoDeregister call: "before", "after" or "" (succeed)
}

func (a *flakyDereg) Apply(ctx context.Context, cmd fsm.Command) (uint64, error) {
	if _, ok := cmd.(fsm.AutoDeregisterRequest); !ok {
		return a.fakeApplier.Apply(ctx, cmd)
	}
	a.mu.Lock()
	mode := ""
	if len(a.modes) > 0 {
		mode, a.modes = a.modes[0], a.modes[1:]
	}
	a.mu.Unlock()
	if mode == "before" {
		a.fakeApplier.mu.Lock()
		a.fakeApplier.calls = append(a.fakeApplier.calls, applyCall{typ: cmd.MessageType(), dereg: cmd.(fsm.AutoDeregisterRequest)})
		a.fakeApplier.mu.Unlock()
		return 0, errors.New("timed out enqueuing")
	}
	idx, err := a.fakeApplier.Apply(ctx, cmd)
	if mode == "after" && err == nil {
		return 0, errors.New("leadership lost")
	}
	return idx, err
}

// A failed submission is retried; a retry of a command that was in fact committed finds
// nothing to remove: the instance is deleted once.
func TestProber_DeregistrationRetriesRemoveOnce(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		counted float64 // the leader counts only what it knows it committed
	}{{"before", 1}, {"after", 0}} {
		t.Run(tc.mode, func(t *testing.T) {
			e := newDeregEnv()
			app := &flakyDereg{fakeApplier: e.app, modes: []string{tc.mode}}
			in := e.addInstances(1, true)[0]
			deletes := 0
			events, cancel := e.src.Subscribe(64)
			defer cancel()
			p := mustNewProber(t, e.cfg, e.src, app)
			runProber(t, p)
			since := e.goUnhealthy(t, p, in)
			e.advanceTo(time.UnixMilli(since).Add(dAfter))
			wait.For(t, 5*time.Second, "the first attempt", func() bool { return len(e.app.deregCalls()) >= 1 })
			// Not committed: retried after the backoff. Committed: the change feed may
			// report the delete first (nothing left to retry), or the retry finds the
			// instance gone.
			wait.For(t, 5*time.Second, "gone", func() bool {
				e.clk.Advance(maxRetryBackoff)
				return !present(e, in)
			})
			for len(events) > 0 {
				for _, ev := range <-events {
					if ev.Kind == store.EventInstanceDelete {
						deletes++
					}
				}
			}
			if deletes != 1 {
				t.Fatalf("%d deletes, want 1", deletes)
			}
			wait.For(t, 5*time.Second, "the outcome handled", func() bool {
				p.mu.RLock()
				defer p.mu.RUnlock()
				return !p.deregistering && len(p.deregQueue) == 0
			})
			e.clk.Advance(maxRetryBackoff)
			if n := len(e.app.deregCalls()); n < 1 || n > 2 || (tc.mode == "before" && n != 2) {
				t.Fatalf("%d AutoDeregister calls", n)
			}
			if got := metricValue(t, p.met.autoDeregs); got != tc.counted {
				t.Fatalf("counted %v, want %v", got, tc.counted)
			}
		})
	}
}
