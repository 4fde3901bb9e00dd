package healthcheck

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// The real types satisfy the interfaces the prober consumes.
var (
	_ Source        = (*store.Store)(nil)
	_ ClusterSource = (*store.Store)(nil)
	_ Applier       = (*raftnode.Node)(nil)
)

// fsmApplier applies commands to an FSM as consecutive log entries, as the leader's
// Raft would once they are committed.
type fsmApplier struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func (a *fsmApplier) Apply(_ context.Context, cmd fsm.Command) (uint64, error) {
	buf, err := fsm.Encode(cmd)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.idx++
	res, ok := a.f.Apply(&raft.Log{Index: a.idx, Term: 1, Type: raft.LogCommand, Data: buf}).(*fsm.Result)
	if !ok {
		return 0, fmt.Errorf("unexpected FSM result")
	}
	return res.Index, res.Err
}

func (a *fsmApplier) mustApply(t *testing.T, cmd fsm.Command) {
	t.Helper()
	if _, err := a.Apply(context.Background(), cmd); err != nil {
		t.Fatalf("apply %s: %v", cmd.MessageType(), err)
	}
}

func mustNewStore(t *testing.T) *store.Store {
	t.Helper()
	s := storetest.Open(t)
	return s
}

func storeHealthy(t *testing.T, s *store.Store, ref model.InstanceRef) bool {
	t.Helper()
	_, in, err := s.Instance(nil, ref)
	if err != nil {
		t.Fatal(err)
	}
	return in.Healthy
}

func TestProber_WithStoreAndFSM(t *testing.T) {
	st := mustNewStore(t)
	app := &fsmApplier{f: fsm.New(st, nil)}
	cluster := func(name string, hc model.HealthCheck) fsm.UpsertClusterRequest {
		return fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: testSvc.Namespace, Group: testSvc.Group,
			Service: testSvc.Service, Name: name, HealthCheck: hc}}
	}
	app.mustApply(t, cluster(model.DefaultCluster, tcpCheck(time.Second, 1, 1)))
	app.mustApply(t, cluster("manual", model.HealthCheck{Type: model.CheckNone,
		Interval: model.Duration(time.Second), Timeout: model.Duration(time.Second / 2), Rise: 1, Fall: 1}))
	a := inst("127.100.0.1", 8080, false)
	app.mustApply(t, fsm.RegisterInstanceRequest{Instance: a})
	manual := inst("127.100.0.2", 8080, false)
	manual.Cluster = "manual"
	app.mustApply(t, fsm.RegisterInstanceRequest{Instance: manual})

	clk, fnet := newFakeClock(), newFakeNet()
	p := mustNewProber(t, Config{Clock: clk, Dial: fnet.dial}, st, app)
	runProber(t, p)

	// Reachable and committed unhealthy: one success (rise 1) is committed.
	wait.For(t, 5*time.Second, "healthy committed", func() bool {
		clk.Advance(100 * time.Millisecond)
		return storeHealthy(t, st, a.Ref())
	})
	wait.For(t, 5*time.Second, "prober view updated", func() bool {
		r, _ := resultFor(p, a.IP, a.Port)
		return r.Healthy && !r.Pending
	})
	fnet.setDown(a.Addr(), true)
	wait.For(t, 5*time.Second, "unhealthy committed", func() bool {
		clk.Advance(100 * time.Millisecond)
		return !storeHealthy(t, st, a.Ref())
	})
	if r, _ := resultFor(p, manual.IP, manual.Port); r.CheckType != model.CheckNone || r.Outcome != "" {
		t.Fatalf("NONE instance probed: %+v", r)
	}

	// A spec change through the log reschedules.
	app.mustApply(t, cluster(model.DefaultCluster, model.HealthCheck{Type: model.CheckHTTP,
		Path: "/hz", Interval: model.Duration(2 * time.Second), Timeout: model.Duration(time.Second), Rise: 1, Fall: 1}))
	wait.For(t, 5*time.Second, "HTTP spec applied", func() bool {
		r, _ := resultFor(p, a.IP, a.Port)
		return r.CheckType == model.CheckHTTP && r.Target == "http://127.100.0.1:8080/hz"
	})

	// An instance registered into a new cluster gets the implicit cluster's spec.
	c := inst("127.100.0.3", 9000, true)
	c.Cluster = "fresh"
	app.mustApply(t, fsm.RegisterInstanceRequest{Instance: c})
	wait.For(t, 5*time.Second, "new instance scheduled", func() bool {
		r, ok := resultFor(p, c.IP, c.Port)
		return ok && r.CheckType == model.CheckTCP && r.Interval == model.DefaultCheckInterval
	})

	// Deregistration drops the instance.
	app.mustApply(t, fsm.DeregisterInstanceRequest{Ref: a.Ref()})
	wait.For(t, 5*time.Second, "instance dropped", func() bool { _, ok := resultFor(p, a.IP, a.Port); return !ok })
}

// Through the real state machine: a probed instance that goes down and a NONE instance
// set unhealthy by API record the committed time and are deregistered at their
// deadlines; changing deregisterAfter moves the deadline of an instance already
// unhealthy; the change feed reports the reason.
func TestProber_AutoDeregistrationWithStoreAndFSM(t *testing.T) {
	st := mustNewStore(t)
	app := &fsmApplier{f: fsm.New(st, nil)}
	cluster := func(name string, hc model.HealthCheck) fsm.UpsertClusterRequest {
		return fsm.UpsertClusterRequest{Cluster: model.Cluster{Namespace: testSvc.Namespace, Group: testSvc.Group,
			Service: testSvc.Service, Name: name, HealthCheck: hc}}
	}
	probed := tcpCheck(time.Second, 1, 1)
	probed.DeregisterAfter = model.Duration(time.Hour)
	app.mustApply(t, cluster(model.DefaultCluster, probed))
	none := model.HealthCheck{Type: model.CheckNone, Interval: model.Duration(time.Second), Timeout: model.Duration(time.Second / 2),
		Rise: 1, Fall: 1, DeregisterAfter: model.Duration(30 * time.Second)}
	app.mustApply(t, cluster("manual", none))
	a := inst("127.100.0.1", 8080, true)
	app.mustApply(t, fsm.RegisterInstanceRequest{Instance: a})
	manual := inst("127.100.0.2", 8080, true)
	manual.Cluster = "manual"
	app.mustApply(t, fsm.RegisterInstanceRequest{Instance: manual})
	events, cancel := st.Subscribe(64)
	defer cancel()

	clk, fnet := newFakeClock(), newFakeNet()
	p := mustNewProber(t, Config{Clock: clk, Dial: fnet.dial}, st, app)
	runProber(t, p)
	fnet.setDown(a.Addr(), true)
	wait.For(t, 5*time.Second, "unhealthy committed", func() bool {
		clk.Advance(100 * time.Millisecond)
		return !storeHealthy(t, st, a.Ref())
	})
	_, in, err := st.Instance(nil, a.Ref())
	if err != nil || in.UnhealthySince == 0 || in.UnhealthySince > clk.Now().UnixMilli() {
		t.Fatalf("unhealthySince %d (%v), want the prober's clock at submission", in.UnhealthySince, err)
	}
	since := in.UnhealthySince

	// The API's health set on the NONE instance, as the registry submits it.
	manualAt := clk.Now().UnixMilli()
	app.mustApply(t, fsm.SetHealthManualAtRequest{Ref: manual.Ref(), Healthy: false, At: manualAt})
	wait.For(t, 5*time.Second, "the NONE instance deregistered at its deadline", func() bool {
		if _, _, err := st.Instance(nil, manual.Ref()); err != nil {
			return true
		}
		clk.Advance(time.Second)
		return false
	})
	if got := clk.Now().UnixMilli(); got < manualAt+(30*time.Second).Milliseconds() {
		t.Fatalf("the NONE instance was deregistered %dms before its deadline", manualAt+(30*time.Second).Milliseconds()-got)
	}

	// Shortening deregisterAfter applies to the instance already unhealthy: its deadline
	// is since + 1m now, already passed.
	probed.DeregisterAfter = model.Duration(time.Minute)
	if clk.Now().Before(time.UnixMilli(since).Add(time.Minute)) {
		clk.Advance(time.UnixMilli(since).Add(time.Minute).Sub(clk.Now()))
	}
	app.mustApply(t, cluster(model.DefaultCluster, probed))
	wait.For(t, 5*time.Second, "the probed instance deregistered", func() bool {
		_, _, err := st.Instance(nil, a.Ref())
		return err != nil
	})
	reasons := map[string]string{}
	for len(events) > 0 {
		for _, ev := range <-events {
			if ev.Kind == store.EventInstanceDelete {
				reasons[ev.Ref.IP] = ev.Reason
			}
		}
	}
	if reasons[a.IP] != store.ReasonAutoDeregistered || reasons[manual.IP] != store.ReasonAutoDeregistered {
		t.Fatalf("delete reasons %v", reasons)
	}
	if got := metricValue(t, p.met.autoDeregs); got != 2 {
		t.Fatalf("roster_health_auto_deregistrations_total = %v, want 2", got)
	}
}
