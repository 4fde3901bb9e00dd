package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/clock"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testSvc = model.ServiceKey{Namespace: "public", Group: "DEFAULT_GROUP", Service: "svc"}

// inst is an instance of testSvc's DEFAULT cluster.
func inst(ip string, port int, healthy bool) model.Instance {
	return model.Instance{
		Namespace: testSvc.Namespace, Group: testSvc.Group, Service: testSvc.Service,
		IP: ip, Port: port, Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: healthy,
	}
}

// tcpCheck is a TCP spec with the given interval and rise/fall.
func tcpCheck(interval time.Duration, rise, fall int) model.HealthCheck {
	return model.HealthCheck{Type: model.CheckTCP, Interval: model.Duration(interval),
		Timeout: model.Duration(interval / 2), Rise: rise, Fall: fall}
}

// fakeSource is an in-memory Source whose writes emit change-feed events.
type fakeSource struct {
	mu        sync.Mutex
	index     uint64
	instances map[model.InstanceRef]model.Instance
	checks    map[clusterKey]model.HealthCheck
	subs      []chan []store.Event
	scanErr   error
	scans     int
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		instances: make(map[model.InstanceRef]model.Instance),
		checks:    make(map[clusterKey]model.HealthCheck),
	}
}

// ForEachInstanceHealth runs fn with the source locked, as the store runs it inside its
// read transaction.
func (s *fakeSource) ForEachInstanceHealth(fn func(store.InstanceHealth, *model.HealthCheck) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scans++
	if s.scanErr != nil {
		return s.scanErr
	}
	refs := make([]model.InstanceRef, 0, len(s.instances))
	for r := range s.instances {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b model.InstanceRef) int {
		return cmpString(fmt.Sprint(a), fmt.Sprint(b))
	})
	for _, r := range refs {
		in := s.instances[r]
		hc := s.checkLocked(clusterKey{in.ServiceKey(), in.Cluster})
		if !fn(store.HealthOf(in), &hc) {
			break
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *fakeSource) Subscribe(buffer int) (<-chan []store.Event, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan []store.Event, buffer)
	s.subs = append(s.subs, ch)
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.subs, ch); i >= 0 {
			s.subs = slices.Delete(s.subs, i, i+1)
		}
	}
}

// Cluster makes fakeSource a ClusterSource.
func (s *fakeSource) Cluster(_ *store.WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hc, ok := s.checks[clusterKey{key, name}]
	if !ok {
		return 0, model.Cluster{}, model.ErrNotFound
	}
	return s.index, model.Cluster{Namespace: key.Namespace, Group: key.Group, Service: key.Service, Name: name, HealthCheck: hc}, nil
}

func (s *fakeSource) checkLocked(k clusterKey) model.HealthCheck {
	if hc, ok := s.checks[k]; ok {
		return hc
	}
	return model.DefaultHealthCheck()
}

func (s *fakeSource) emitLocked(evs ...store.Event) {
	for _, ch := range s.subs {
		ch <- evs
	}
}

// emit sends one commit's events to every subscriber.
func (s *fakeSource) emit(evs ...store.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(evs...)
}

// setCheck sets a cluster's spec, emitting EventClusterUpsert when emit is true.
func (s *fakeSource) setCheck(svc model.ServiceKey, cluster string, hc model.HealthCheck, emit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	s.checks[clusterKey{svc, cluster}] = hc
	if emit {
		s.emitLocked(store.Event{Kind: store.EventClusterUpsert, Cluster: model.Cluster{
			Namespace: svc.Namespace, Group: svc.Group, Service: svc.Service, Name: cluster,
			HealthCheck: hc, ModifyIndex: s.index,
		}})
	}
}

// register creates (new epoch) or replaces an instance like the store does, emitting
// EventInstanceUpsert when emit is true. It returns the stored instance.
func (s *fakeSource) register(in model.Instance, emit bool) model.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	if old, ok := s.instances[in.Ref()]; ok && in.CreateIndex == 0 {
		in.CreateIndex, in.Healthy = old.CreateIndex, old.Healthy
	} else if in.CreateIndex == 0 {
		in.CreateIndex = s.index
	}
	in.ModifyIndex = s.index
	s.instances[in.Ref()] = in
	if emit {
		s.emitLocked(store.Event{Kind: store.EventInstanceUpsert, Instance: in, Ref: in.Ref()})
	}
	return in
}

// deregister removes an instance, emitting EventInstanceDelete (with the instance's
// last state, as the store does) when emit is true.
func (s *fakeSource) deregister(ref model.InstanceRef, emit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	old := s.instances[ref]
	delete(s.instances, ref)
	if emit {
		s.emitLocked(store.Event{Kind: store.EventInstanceDelete, Ref: ref, Instance: old, Service: ref.ServiceKey()})
	}
}

// setHealth applies a SetHealthAt command like the store: updates of a missing instance
// or another epoch, or to the current state, are skipped; an instance made unhealthy
// records at (Unix ms), one made healthy clears it, and an unhealthy one without a
// time records at.
func (s *fakeSource) setHealth(ups []model.HealthUpdate, at int64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	var evs []store.Event
	for _, u := range ups {
		in, ok := s.instances[u.Ref]
		stamp := !u.Healthy && !in.Healthy && in.UnhealthySince == 0 && at > 0
		if !ok || in.CreateIndex != u.Epoch || (in.Healthy == u.Healthy && !stamp) {
			continue
		}
		switch {
		case u.Healthy:
			in.UnhealthySince = 0
		case in.Healthy || in.UnhealthySince == 0:
			in.UnhealthySince = at
		}
		in.Healthy, in.ModifyIndex = u.Healthy, s.index
		s.instances[u.Ref] = in
		evs = append(evs, store.Event{Kind: store.EventInstanceUpsert, Instance: in, Ref: u.Ref})
	}
	if len(evs) > 0 {
		s.emitLocked(evs...)
	}
	return s.index
}

// autoDeregister applies an AutoDeregister command like the store.
func (s *fakeSource) autoDeregister(d store.AutoDeregistration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[d.Ref]
	switch {
	case !ok:
		return 0, model.ErrNotFound
	case in.CreateIndex != d.Epoch || in.Healthy || in.UnhealthySince == 0 || in.UnhealthySince != d.UnhealthySince:
		return 0, model.ErrConflict
	}
	s.index++
	delete(s.instances, d.Ref)
	s.emitLocked(store.Event{Kind: store.EventInstanceDelete, Ref: d.Ref, Instance: in, Service: d.Ref.ServiceKey(),
		Reason: store.ReasonAutoDeregistered})
	return s.index, nil
}

func (s *fakeSource) instance(ref model.InstanceRef) model.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instances[ref]
}

// applyCall is one recorded Apply.
type applyCall struct {
	typ     fsm.MessageType
	req     fsm.SetHealthRequest // the updates of a SetHealthAt command
	cmdAt   int64                // its At
	dereg   fsm.AutoDeregisterRequest
	ctxDone bool // ctx was already done when Apply was called
	at      time.Time
}

// fakeApplier records commands; with src set it applies SetHealth to it.
type fakeApplier struct {
	mu    sync.Mutex
	calls []applyCall
	src   *fakeSource
	// fail, when set, decides the error of the n-th call (0-based).
	fail func(ctx context.Context, n int) error
}

func (a *fakeApplier) Apply(ctx context.Context, cmd fsm.Command) (uint64, error) {
	call := applyCall{typ: cmd.MessageType(), ctxDone: ctx.Err() != nil, at: time.Now()}
	switch c := cmd.(type) {
	case fsm.SetHealthAtRequest:
		call.req, call.cmdAt = fsm.SetHealthRequest{Updates: c.Updates}, c.At
	case fsm.AutoDeregisterRequest:
		call.dereg = c
	default:
		return 0, fmt.Errorf("unexpected payload %T", cmd)
	}
	a.mu.Lock()
	n := len(a.calls)
	a.calls = append(a.calls, call)
	fail := a.fail
	a.mu.Unlock()
	if fail != nil {
		if err := fail(ctx, n); err != nil {
			return 0, err
		}
	}
	if call.typ == fsm.AutoDeregisterType {
		if a.src != nil {
			return a.src.autoDeregister(call.dereg.Instance)
		}
		return uint64(n + 1), nil
	}
	if a.src != nil {
		return a.src.setHealth(call.req.Updates, call.cmdAt), nil
	}
	return uint64(n + 1), nil
}

// healthCalls returns the recorded SetHealthAt calls.
func (a *fakeApplier) healthCalls() []applyCall {
	var out []applyCall
	for _, c := range a.snapshot() {
		if c.typ == fsm.SetHealthAtType {
			out = append(out, c)
		}
	}
	return out
}

// deregCalls returns the recorded AutoDeregister calls.
func (a *fakeApplier) deregCalls() []applyCall {
	var out []applyCall
	for _, c := range a.snapshot() {
		if c.typ == fsm.AutoDeregisterType {
			out = append(out, c)
		}
	}
	return out
}

func (a *fakeApplier) snapshot() []applyCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// updates flattens every recorded update.
func (a *fakeApplier) updates() []model.HealthUpdate {
	var out []model.HealthUpdate
	for _, c := range a.snapshot() {
		out = append(out, c.req.Updates...)
	}
	return out
}

// newFakeClock is a manual clock: timers fire only when Advance passes their deadline.
func newFakeClock() *clock.Manual {
	return clock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fakeNet is a Config.Dial hook: addresses marked down are refused, and while block is
// open every dial waits for it (or for its context).
type fakeNet struct {
	mu       sync.Mutex
	down     map[string]bool
	block    chan struct{}
	dials    []string
	cur, max int
}

func newFakeNet() *fakeNet { return &fakeNet{down: make(map[string]bool)} }

var errRefused = errors.New("connect: connection refused")

func (n *fakeNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dials = append(n.dials, addr)
	n.cur++
	n.max = max(n.max, n.cur)
	block, down := n.block, n.down[addr]
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.cur--
		n.mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if down {
		return nil, errRefused
	}
	c1, c2 := net.Pipe()
	_ = c2.Close()
	return c1, nil
}

func (n *fakeNet) setDown(addr string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[addr] = down
}

func (n *fakeNet) blockDials() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.block = make(chan struct{})
}

func (n *fakeNet) unblock() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.block != nil {
		close(n.block)
		n.block = nil
	}
}

func (n *fakeNet) stats() (dials, cur, maxSeen int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.dials), n.cur, n.max
}

// runProber starts p.Run and returns a function that cancels it and waits for Run to
// return; the test's cleanup does the same.
func runProber(t *testing.T, p *Prober) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	wait.For(t, 5*time.Second, "prober running", func() bool {
		_, running := p.Results(testSvc)
		return running
	})
	return stop
}

// mustNewProber builds a prober on fakes.
func mustNewProber(t *testing.T, cfg Config, src Source, app Applier) *Prober {
	t.Helper()
	p, err := NewProber(cfg, src, app, nil)
	if err != nil {
		t.Fatalf("NewProber: %v", err)
	}
	return p
}

// resultFor returns the result of one instance of testSvc.
func resultFor(p *Prober, ip string, port int) (Result, bool) {
	rs, _ := p.Results(testSvc)
	for _, r := range rs {
		if r.IP == ip && r.Port == port {
			return r, true
		}
	}
	return Result{}, false
}

// metricValue reads a counter or gauge value, or a histogram's sample count.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	case d.Histogram != nil:
		return float64(d.Histogram.GetSampleCount())
	}
	t.Fatalf("unsupported metric %v", &d)
	return 0
}
