// Package healthcheck probes the registry's persistent instances from the Raft leader and
// commits their health transitions through Raft.
//
// Instances never send heartbeats. While a node is leader its Prober checks every
// instance of a TCP or HTTP cluster at the cluster's interval, runs a rise/fall state
// machine per instance, and submits only transitions, batched into SetHealth commands
// that carry each instance's registration epoch. NONE clusters are not probed; their
// health is set through the API.
package healthcheck

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

const (
	// eventBuffer is the change-feed buffer, in commits.
	eventBuffer = 1024
	// maxRetryBackoff bounds the wait between failed SetHealth and AutoDeregister
	// submissions and between failed rescans (backoff).
	maxRetryBackoff = 5 * time.Second
)

// Prober probes instances during one leadership term: Run it once, when the node has
// become leader and applied every entry of earlier terms, with a context cancelled when
// leadership is lost. Create a new Prober for the next term.
//
// A Prober starts from the committed health of every instance with its counters at
// zero, so a change of leader never flips an instance by itself. It submits nothing
// once its context is done, and nothing at all after Run has returned.
type Prober struct {
	cfg     Config
	src     Source
	app     Applier
	log     *slog.Logger
	met     *metrics
	check   *checker
	started atomic.Bool

	// mu guards what Results reads: running, the targets and their fields. Only the
	// Run goroutine writes them.
	mu      sync.RWMutex
	running bool
	bySvc   map[model.ServiceKey]*svcTargets // every target, by service and address
	count   int                              // targets in bySvc

	// Owned by the Run goroutine (written with mu held where targets are involved).
	clusters       map[clusterKey]*spec
	sched          schedule
	inFlight       int
	workers        int
	jobs           chan probeJob
	results        chan probeResult
	dirty          []*target // targets with a transition to submit, in decision order
	flushAt        time.Time // when the current batch window closes (zero: no batch)
	submitRetry    backoff   // of failed SetHealth submissions
	submitting     bool
	submitted      chan submitResult
	confirmed      chan confirmResult
	needRescan     bool
	scans          uint32 // rescans started, the number of the current one
	rescanRetry    backoff
	gen            uint64
	reportedTarget int
	wg             sync.WaitGroup

	// The rate limit of inconclusive confirmations' log lines (confirm.go), owned by the
	// Run goroutine: when one was last logged, and how many were not logged since.
	inconclusiveLogAt      time.Time
	inconclusiveSuppressed int

	// Automatic deregistration (dereg.go), owned by the Run goroutine.
	deregs        deregHeap // targets with a deadline, earliest first
	deregQueue    []*target // due, waiting to be submitted
	deregistering bool      // a submission is in flight
	deregDone     chan []deregItem
	deregRetry    backoff
}

type clusterKey struct {
	svc  model.ServiceKey
	name string
}

type probeResult struct {
	t    *target
	gen  uint64
	at   time.Time // when the probe started (Config.Clock)
	kind model.CheckType
	out  outcome
}

type batchItem struct {
	t       *target
	gen     uint64
	healthy bool
	stamp   bool // no transition: records the time of a committed unhealthy state
}

type submitResult struct {
	items []batchItem
	index uint64
	err   error
}

// NewProber returns a Prober for one leadership term. cfg is validated (defaults filled);
// its metrics are registered on cfg.Registerer, reusing collectors an earlier Prober or
// Manager registered there.
func NewProber(cfg Config, src Source, app Applier, logger *slog.Logger) (*Prober, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil || app == nil {
		return nil, errors.New("healthcheck: NewProber needs a Source and an Applier")
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return newProber(cfg, src, app, logger, met), nil
}

// newProber builds a Prober from a validated cfg.
func newProber(cfg Config, src Source, app Applier, logger *slog.Logger, met *metrics) *Prober {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Prober{
		cfg:       cfg,
		src:       src,
		app:       app,
		log:       logger,
		met:       met,
		check:     newChecker(cfg),
		bySvc:     make(map[model.ServiceKey]*svcTargets),
		clusters:  make(map[clusterKey]*spec),
		jobs:      make(chan probeJob, cfg.MaxConcurrent),
		results:   make(chan probeResult, cfg.MaxConcurrent),
		submitted: make(chan submitResult, 1),
		confirmed: make(chan confirmResult),
		deregDone: make(chan []deregItem, 1),
	}
}

// Run probes until ctx is done, then waits for its probes and its SetHealth submission
// in flight to end (both use ctx) and returns. A Prober runs once; later calls return
// at once.
func (p *Prober) Run(ctx context.Context) {
	if !p.started.CompareAndSwap(false, true) {
		p.log.Error("health prober: Run called twice; use a new Prober per leadership term")
		return
	}
	events, unsubscribe := p.src.Subscribe(eventBuffer)
	defer unsubscribe()
	if p.initialScan(ctx) {
		p.mu.RLock()
		p.log.Info("health prober started", "instances", p.count, "probed", len(p.sched))
		p.mu.RUnlock()
		p.loop(ctx, events)
	}
	p.wg.Wait()
	p.mu.Lock()
	p.running = false
	p.bySvc, p.clusters, p.sched, p.dirty = nil, nil, nil, nil
	p.count = 0
	p.deregs, p.deregQueue = nil, nil
	p.mu.Unlock()
	p.met.inFlight.Sub(float64(p.inFlight))
	p.met.targets.Sub(float64(p.reportedTarget))
	p.log.Info("health prober stopped")
}

// Results returns the prober's view of every instance of the service, sorted by
// (IP, Port), and whether the prober is running (its initial scan done, Run not ended).
// A service the prober does not know yields an empty slice.
func (p *Prober) Results(key model.ServiceKey) ([]Result, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.running {
		return nil, false
	}
	var ts map[addrKey]*target
	if st := p.bySvc[key]; st != nil {
		ts = st.byAddr
	}
	out := make([]Result, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.result())
	}
	sortResults(out)
	return out, true
}

// initialScan loads every instance, retrying until it succeeds or ctx is done.
func (p *Prober) initialScan(ctx context.Context) bool {
	var retry backoff
	for ctx.Err() == nil {
		p.mu.Lock()
		err := p.rescan(p.cfg.Clock.Now())
		if err == nil {
			p.running = true
		}
		p.mu.Unlock()
		if err == nil {
			return true
		}
		wait := retry.failed(p.cfg.Clock.Now(), firstRetry)
		p.log.Error("health prober: reading instances failed", "err", err, "retry", wait)
		t := p.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
	}
	return false
}

// loop is the single scheduler goroutine: it starts due probes, consumes their
// results, follows the change feed and batches transitions.
func (p *Prober) loop(ctx context.Context, events <-chan []store.Event) {
	clk := p.cfg.Clock
	wake, flush := newAlarm(clk), newAlarm(clk)
	defer wake.t.Stop()
	defer flush.t.Stop()
	for {
		p.mu.Lock()
		now := clk.Now()
		if p.needRescan && !p.rescanRetry.holds(now) {
			p.retryRescan(now)
		}
		p.dispatch(ctx, now)
		p.maybeSubmit(ctx, now)
		p.queueDueDeregs(now)
		p.maybeDeregister(ctx, now)
		wake.set(now, p.nextWake())
		flush.set(now, p.nextFlush())
		p.reportTargets()
		p.mu.Unlock()

		select {
		case <-ctx.Done():
			return
		case <-wake.t.C():
			wake.fired()
		case <-flush.t.C():
			flush.fired()
		case r := <-p.results:
			p.mu.Lock()
			now := clk.Now()
			p.handleResult(ctx, r, now)
			for drained := false; !drained; {
				select {
				case r := <-p.results:
					p.handleResult(ctx, r, now)
				default:
					drained = true
				}
			}
			p.mu.Unlock()
		case evs, ok := <-events:
			if !ok {
				p.log.Warn("health prober: change feed closed; the schedule no longer follows the registry")
				events = nil
				continue
			}
			p.mu.Lock()
			p.handleEvents(evs, clk.Now())
			p.mu.Unlock()
		case r := <-p.submitted:
			p.mu.Lock()
			p.handleSubmit(ctx, r, clk.Now())
			p.mu.Unlock()
		case r := <-p.confirmed:
			p.mu.Lock()
			p.handleConfirm(ctx, r, clk.Now())
			p.mu.Unlock()
		case items := <-p.deregDone:
			p.mu.Lock()
			p.handleDeregs(ctx, items, clk.Now())
			p.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// dispatch starts every due probe while fewer than MaxConcurrent are in flight. Each
// instance keeps its phase: the next due time is the previous due time plus the
// interval, whatever the lag; rounds a whole interval late are skipped.
func (p *Prober) dispatch(ctx context.Context, now time.Time) {
	for len(p.sched) > 0 && p.inFlight < p.cfg.MaxConcurrent {
		t := p.sched[0]
		if t.next.After(now) {
			return
		}
		due, iv := t.next, t.spec.interval
		t.next = due.Add(iv)
		if !t.next.After(now) {
			missed := now.Sub(t.next)/iv + 1
			t.next = t.next.Add(missed * iv)
			p.met.skipped.Add(float64(missed))
		}
		heap.Fix(&p.sched, 0)
		if t.probing {
			p.met.skipped.Inc()
			continue
		}
		t.probing = true
		p.inFlight++
		p.met.inFlight.Inc()
		p.met.lag.Observe(now.Sub(due).Seconds())
		// Neither channel can fill: at most MaxConcurrent jobs are queued or running.
		addr, url := probeTarget(t.ref, t.spec)
		p.jobs <- probeJob{t: t, gen: t.gen, at: now, spec: t.spec, addr: addr, url: url}
		if p.inFlight > p.workers {
			p.workers++
			p.wg.Go(func() { p.work(ctx) })
		}
	}
}

// probeJob is one probe handed to a worker, with everything it needs copied.
type probeJob struct {
	t    *target
	gen  uint64
	at   time.Time
	spec *spec
	addr string
	url  string
}

// work is a probe worker. Workers are started on demand, one per probe in flight
// beyond the idle ones, up to MaxConcurrent, and live until ctx is done.
func (p *Prober) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.jobs:
			o := p.check.probe(ctx, j.spec, j.addr, j.url)
			p.results <- probeResult{t: j.t, gen: j.gen, at: j.at, kind: j.spec.hc.Type, out: o}
		}
	}
}

// handleResult feeds a probe outcome to its instance's state machine, unless the
// instance was removed, re-registered or re-specified since the probe started.
func (p *Prober) handleResult(ctx context.Context, r probeResult, now time.Time) {
	p.inFlight--
	p.met.inFlight.Dec()
	p.met.observeProbe(r.kind, r.out.ok, r.out.latency.Seconds())
	if r.out.class == OutcomeDenied {
		p.met.denied.Inc()
	}
	t := r.t
	t.probing = false
	if !p.current(t) || t.gen != r.gen {
		p.met.discarded.Inc()
		return
	}
	t.state().last = lastProbe{at: r.at, outcome: r.out, done: true}
	var flipped bool
	t.st, flipped = step(t.st, r.out.ok, t.spec.hc.Rise, t.spec.hc.Fall)
	if flipped {
		p.log.Debug("health transition decided", "instance", refString(t.ref), "healthy", t.st.healthy, "err", r.out.err)
		switch {
		case !t.pending():
		case p.needsConfirmation(t):
			p.confirm(ctx, t)
		default:
			p.markDirty(t, now)
		}
		p.updateDeadline(t)
	}
}

// nextWake is when the scheduler must look at the schedule again (zero: only when
// something else happens).
func (p *Prober) nextWake() time.Time {
	var at time.Time
	if len(p.sched) > 0 && p.inFlight < p.cfg.MaxConcurrent {
		at = p.sched[0].next
	}
	if p.needRescan && (at.IsZero() || p.rescanRetry.at.Before(at)) {
		at = p.rescanRetry.at
	}
	if d := p.nextDereg(); !d.IsZero() && (at.IsZero() || d.Before(at)) {
		at = d
	}
	return at
}

func (p *Prober) reportTargets() {
	if n := len(p.sched); n != p.reportedTarget {
		p.met.targets.Add(float64(n - p.reportedTarget))
		p.reportedTarget = n
	}
}

// alarm is a Timer plus the deadline it is armed for (zero: disarmed).
type alarm struct {
	t  Timer
	at time.Time
}

func newAlarm(clk Clock) *alarm {
	t := clk.NewTimer(time.Hour)
	t.Stop()
	return &alarm{t: t}
}

// set arms the alarm for at (zero: disarms it) unless it is already armed for at.
func (a *alarm) set(now, at time.Time) {
	if at.Equal(a.at) {
		return
	}
	a.at = at
	if at.IsZero() {
		a.t.Stop()
		return
	}
	a.t.Reset(at.Sub(now))
}

// fired records that the alarm's value was received.
func (a *alarm) fired() { a.at = time.Time{} }

func (p *Prober) nextGen() uint64 {
	p.gen++
	return p.gen
}

func refString(r model.InstanceRef) string {
	return r.ServiceKey().String() + "/" + model.JoinAddr(r.IP, r.Port)
}

// randomPhase is a first due time uniformly spread inside one interval from now.
func randomPhase(now time.Time, iv time.Duration) time.Time {
	return now.Add(rand.N(iv))
}

// submitUpdates is the body of the submission goroutine: it never calls Apply once
// ctx is done.
// at is the leader's clock in Unix milliseconds, recorded by the instances the command
// makes unhealthy.
func (p *Prober) submitUpdates(ctx context.Context, items []batchItem, ups []model.HealthUpdate, at int64) {
	r := submitResult{items: items}
	if r.err = ctx.Err(); r.err == nil {
		r.index, r.err = p.app.Apply(ctx, fsm.SetHealthAtRequest{Updates: ups, At: at})
	}
	p.submitted <- r // never blocks: one submission at a time, buffer 1
}
