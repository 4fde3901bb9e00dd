//go:build linux

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/model"
)

// Workload addresses: every service lives in the public namespace and default group;
// instance p of a service is InstanceIP:p.
const (
	InstanceIP = "127.100.0.1"
	namespace  = model.DefaultNamespace
	group      = model.DefaultGroup
)

// ServiceName is the name of workload service i.
func ServiceName(i int) string { return "svc-" + strconv.Itoa(i) }

// WorkloadConfig shapes the client traffic.
type WorkloadConfig struct {
	// Clients is the number of concurrent clients; each has one request in flight.
	Clients int
	// Services and Ports size the key space: Services × Ports instances (Ports ≤ MaxPorts).
	Services, Ports int
	// Think is the largest pause a client takes between requests (uniform in [0, Think]).
	Think time.Duration
	// Seed seeds each client's choices.
	Seed uint64
}

// Workload runs clients that register, patch and deregister instances and read the
// instance lists (linearizable and stale) on random nodes, recording every operation.
type Workload struct {
	cfg  WorkloadConfig
	c    *Cluster
	h    *History
	logf func(string, ...any)

	mu       sync.Mutex
	cond     *sync.Cond
	paused   bool
	inflight int

	// clientBug holds the first request the cluster refused as malformed.
	clientBug error
}

// NewWorkload prepares (but does not start) a workload.
func NewWorkload(cfg WorkloadConfig, c *Cluster, h *History, logf func(string, ...any)) *Workload {
	w := &Workload{cfg: cfg, c: c, h: h, logf: logf}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Setup creates every service with a NONE health check on the default cluster, so that
// only the workload changes instances (no prober flips health). It retries until the
// cluster accepts each write or ctx ends.
func (w *Workload) Setup(ctx context.Context) error {
	none := api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: string(model.CheckNone)}}
	for s := 0; s < w.cfg.Services; s++ {
		for {
			l, err := w.c.Leader(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := withTimeout(ctx)
			_, err = l.Client().UpsertCluster(cctx, namespace, group, ServiceName(s), model.DefaultCluster, none)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.logf("setup of %s: %v; retrying", ServiceName(s), err)
		}
	}
	return nil
}

// Run runs the clients until ctx ends.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < w.cfg.Clients; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			w.client(ctx, id)
		}(i)
	}
	wg.Wait()
}

// Pause stops clients from starting operations and waits until none is in flight.
func (w *Workload) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = true
	for w.inflight > 0 {
		w.cond.Wait()
	}
}

// Resume lets clients start operations again.
func (w *Workload) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = false
	w.cond.Broadcast()
}

// begin waits while the workload is paused and counts the operation in flight; false
// when ctx ended.
func (w *Workload) begin(ctx context.Context) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.paused {
		if ctx.Err() != nil {
			return false
		}
		w.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	w.inflight++
	return true
}

func (w *Workload) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight--
	w.cond.Broadcast()
}

// wake unblocks clients waiting in begin once ctx ends.
func (w *Workload) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cond.Broadcast()
}

// ClientBug returns the first request the cluster refused as malformed, if any.
func (w *Workload) ClientBug() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.clientBug
}

func (w *Workload) client(ctx context.Context, id int) {
	stop := context.AfterFunc(ctx, w.wake)
	defer stop()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(id)))
	for seq := 0; ; seq++ {
		if !w.begin(ctx) {
			return
		}
		n := w.c.Nodes[rng.IntN(len(w.c.Nodes))]
		in := Input{Service: rng.IntN(w.cfg.Services)}
		port := 1 + rng.IntN(w.cfg.Ports)
		switch x := rng.IntN(100); {
		case x < 25:
			in.Kind = Register
		case x < 40:
			in.Kind = Patch
		case x < 55:
			in.Kind = Deregister
		case x < 85:
			in.Kind = Read
		default:
			in.Kind = StaleRead
		}
		if in.Kind.IsWrite() {
			in.Port = port
		}
		if in.Kind == Register || in.Kind == Patch {
			in.Value = fmt.Sprintf("c%d-%d", id, seq)
		}
		w.h.Add(w.do(fmt.Sprintf("c%d-%d", id, seq), id, n, in))
		w.end()
		if w.cfg.Think > 0 {
			t := time.NewTimer(time.Duration(rng.Int64N(int64(w.cfg.Think) + 1)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// do runs one operation against n and returns its record. It is not bound to the
// run's context: an operation in flight when the run ends still completes (or times
// out) and is recorded as such.
func (w *Workload) do(opID string, clientID int, n *Node, in Input) Record {
	rec := Record{OpID: opID, Client: clientID, Node: n.ID, In: in}
	cl := n.Client()
	rec.Call = w.h.Now()
	if cl == nil {
		rec.Return = w.h.Now()
		rec.Out.Outcome, rec.Err = Failed, errNotRunning.Error()
		return rec
	}
	var err error
	rctx, cancel := context.WithTimeout(withOpID(context.Background(), opID), ClientTimeout)
	defer cancel()
	svc := ServiceName(in.Service)
	switch in.Kind {
	case Register:
		rec.Out.Index, err = cl.RegisterInstance(rctx, namespace, group, svc, InstanceIP, in.Port,
			api.InstanceRequest{Metadata: map[string]string{"v": in.Value}})
	case Patch:
		rec.Out.Index, err = cl.UpdateInstance(rctx, namespace, group, svc, InstanceIP, in.Port,
			api.InstanceRequest{Metadata: map[string]string{"v": in.Value}})
	case Deregister:
		rec.Out.Index, err = cl.DeregisterInstance(rctx, namespace, group, svc, InstanceIP, in.Port)
	case Read, StaleRead:
		mode := api.ConsistencyLinearizable
		if in.Kind == StaleRead {
			mode = api.ConsistencyStale
		}
		var resp api.InstancesResponse
		var meta client.Meta
		resp, meta, err = cl.Instances(rctx, namespace, group, svc, client.InstancesQuery{QueryOptions: client.QueryOptions{Consistency: mode}})
		rec.Return = w.h.Now()
		rec.Out.Index = meta.Index
		switch {
		case err == nil:
			rec.Out.State, err = stateOf(resp.Instances)
			if err != nil {
				rec.Out.Outcome, rec.Err = Failed, err.Error()
				w.noteBug(fmt.Errorf("read of %s: %w", svc, err))
				return rec
			}
		case client.IsNotFound(err):
			err = nil // the service does not exist yet: no instances
		default:
			rec.Out.Outcome, rec.Err = Failed, err.Error()
			if isClientBug(err) {
				w.noteBug(err)
			}
			return rec
		}
		rec.Out.Outcome = OK
		return rec
	}
	rec.Return = w.h.Now()
	rec.Out.Outcome = classify(err)
	if in.Kind == Register && rec.Out.Outcome == NotFound {
		// A registration creates whatever it needs: a 404 breaks the API's contract.
		rec.Out.Outcome = Unknown
		w.noteBug(fmt.Errorf("registration of %s:%d answered not found: %v", svc, in.Port, err))
	}
	if err != nil {
		rec.Err = err.Error()
		if isClientBug(err) {
			w.noteBug(err)
		}
	}
	if rec.Out.Outcome == OK && rec.Out.Index == 0 {
		w.noteBug(fmt.Errorf("%s of %s:%d succeeded without an index", in.Kind, svc, in.Port))
	}
	return rec
}

func (w *Workload) noteBug(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.clientBug == nil {
		w.clientBug = err
		w.logf("workload: %v", err)
	}
}

// stateOf projects a service's instance list onto the model's state.
func stateOf(list []api.Instance) (SvcState, error) {
	var st SvcState
	for _, in := range list {
		if in.IP != InstanceIP || in.Port < 1 || in.Port > MaxPorts {
			return st, fmt.Errorf("unexpected instance %s", in.Addr())
		}
		v := in.Metadata["v"]
		if v == "" {
			return st, fmt.Errorf("instance %s without a value", in.Addr())
		}
		if st[in.Port-1] != "" {
			return st, fmt.Errorf("instance %s listed twice", in.Addr())
		}
		st[in.Port-1] = v
	}
	return st, nil
}

// FinalReads reads every service linearizably once the cluster is healthy, so that
// the history ends with the final state; it retries each read until it succeeds.
func (w *Workload) FinalReads(ctx context.Context) error {
	for s := 0; s < w.cfg.Services; s++ {
		for {
			l, err := w.c.Leader(ctx)
			if err != nil {
				return err
			}
			rec := w.do(fmt.Sprintf("final-%d", s), w.cfg.Clients, l, Input{Kind: Read, Service: s})
			if rec.Out.Outcome == OK {
				w.h.Add(rec)
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Converge checks that the replicas agree once the cluster is healthy and idle: a
// stale read of every service on every node must return, within a deadline, exactly
// what a linearizable read on the leader returns.
func (w *Workload) Converge(ctx context.Context) error {
	for s := 0; s < w.cfg.Services; s++ {
		var want []api.Instance
		for {
			l, err := w.c.Leader(ctx)
			if err != nil {
				return err
			}
			rctx, cancel := withTimeout(ctx)
			resp, _, err := l.Client().Instances(rctx, namespace, group, ServiceName(s), client.InstancesQuery{})
			cancel()
			if err == nil {
				want = resp.Instances
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if err := converge(ctx, w.c, ServiceName(s), want); err != nil {
			return fmt.Errorf("replicas diverge: %w", err)
		}
	}
	return nil
}
