package healthcheck

import (
	"context"
	"time"

	"github.com/rosterhq/roster/model"
)

// Majority confirmation. A leader with a partial view of the network (a bad route, a
// flapping interface) must not mark healthy instances down for everyone, nor keep an
// instance up only because it alone can reach it. So when the rise/fall machine decides
// a transition of an instance whose cluster confirms by majority (the default), the
// prober asks the other voters, through a Confirmer, to probe the instance once, and
// queues the transition only when a majority of the nodes that answered in time —
// itself included — saw the same. Otherwise the committed health stands, the counters
// start again, and the next `fall` (or `rise`) probes decide anew. The answers are kept
// and shown with the instance's result.

// ProbeRequest is one probe a node is asked for by the leader: the cluster's check and
// the instance's address.
type ProbeRequest struct {
	Check model.HealthCheck `json:"check"`
	IP    string            `json:"ip"`
	Port  int               `json:"port"`
}

// Vantage is one node's view of an instance in a confirmation: its single probe, or
// why it did not answer.
type Vantage struct {
	Node string `json:"node"`
	// Answered is false when the node could not be asked or did not answer in time;
	// Error says why, and the node's view does not count.
	Answered bool          `json:"answered"`
	Healthy  bool          `json:"healthy"`
	Outcome  string        `json:"outcome,omitempty"`
	Error    string        `json:"error,omitempty"`
	Latency  time.Duration `json:"latency"`
	At       time.Time     `json:"at"`
}

// Confirmer asks the other voters to probe an instance once (the server implements it
// with a node-to-node request to each). It returns one Vantage per other voter, within
// ctx's deadline; it must be safe for concurrent use.
type Confirmer interface {
	Confirm(ctx context.Context, req ProbeRequest) []Vantage
}

// confirmSlack is how long a confirmation may take beyond the check's timeout.
const confirmSlack = time.Second

// confirmResult is the answer to a confirmation the prober started.
type confirmResult struct {
	t        *target
	gen      uint64
	healthy  bool // the transition asked about
	vantages []Vantage
}

// ProbeOnce probes an instance once with check under this node's probe policy, for a
// leader's confirmation. A target the policy denies is a failed probe (outcome
// "denied"), so a node that may not reach it counts as one that cannot.
func (m *Manager) ProbeOnce(ctx context.Context, req ProbeRequest) Vantage {
	sp := newSpec(req.Check)
	addr, url := probeTarget(model.InstanceRef{IP: req.IP, Port: req.Port}, sp)
	at := time.Now()
	o := m.check.probe(ctx, sp, addr, url)
	return Vantage{Answered: true, Healthy: o.ok, Outcome: o.class, Error: o.err, Latency: o.latency, At: at}
}

// needsConfirmation reports whether a decided transition of t must be confirmed by the
// other voters before it is queued.
func (p *Prober) needsConfirmation(t *target) bool {
	return p.cfg.Confirmer != nil && t.spec.hc.Confirm.Majority() && t.spec.probed()
}

// confirm asks the other voters about t's decided transition, unless a confirmation of
// it is already running.
func (p *Prober) confirm(ctx context.Context, t *target) {
	if t.confirming {
		return
	}
	t.confirming = true
	p.met.confirmations.Inc()
	req := ProbeRequest{Check: t.spec.hc, IP: t.ref.IP, Port: t.ref.Port}
	gen, healthy := t.gen, t.st.healthy
	p.wg.Go(func() {
		cctx, cancel := context.WithTimeout(ctx, t.spec.timeout+confirmSlack)
		defer cancel()
		vs := p.cfg.Confirmer.Confirm(cctx, req)
		select {
		case p.confirmed <- confirmResult{t: t, gen: gen, healthy: healthy, vantages: vs}:
		case <-ctx.Done():
		}
	})
}

// handleConfirm counts the answers to a confirmation: with a majority of the nodes that
// answered (this one included) agreeing, the transition is queued; otherwise it is
// dropped and the counters start again.
func (p *Prober) handleConfirm(ctx context.Context, r confirmResult, now time.Time) {
	t := r.t
	t.confirming = false
	if !p.current(t) || t.gen != r.gen {
		return
	}
	last := t.last()
	self := Vantage{Node: p.cfg.NodeID, Answered: true, Healthy: r.healthy, At: last.at,
		Outcome: last.outcome.class, Error: last.outcome.err, Latency: last.outcome.latency}
	t.state().vantages = append([]Vantage{self}, r.vantages...)
	answered, agree := 1, 1
	for _, v := range r.vantages {
		if v.Answered {
			answered++
			if v.Healthy == r.healthy {
				agree++
			}
		}
	}
	if t.st.healthy != r.healthy {
		// The instance flipped back while the others were probing: nothing to commit.
		if t.pending() {
			p.confirm(ctx, t)
		}
		return
	}
	if 2*agree > answered {
		p.log.Debug("health transition confirmed", "instance", refString(t.ref), "healthy", r.healthy,
			"agree", agree, "answered", answered)
		if t.pending() {
			p.markDirty(t, now)
		}
		return
	}
	p.met.overruled.Inc()
	p.log.Info("health transition overruled by the other nodes: the committed health stands",
		"instance", refString(t.ref), "leader_saw_healthy", r.healthy, "agree", agree, "answered", answered)
	t.st = hstate{healthy: t.committed}
}
