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
// queues the transition only when a majority of the *voters* of the latest Raft
// configuration — itself counted as one — saw the same (decide). A voter that could not
// be asked or did not answer in time counts as one that did not see it: when too few
// voters answered for a majority either way, the confirmation is inconclusive
// (roster_health_confirm_inconclusive_total), and when enough voters saw otherwise that
// no majority can see the transition, it is overruled. Either way the committed health
// stands, the counters start again, and the next `fall` (or `rise`) probes decide anew.
// Non-voters are not asked: their view would not count toward the voters' majority. A
// one-node cluster is its own majority and commits on the leader's probes. The answers
// are kept and shown with the instance's result.

// Confirmation is what a Confirmer gathered about one transition.
type Confirmation struct {
	// Voters is how many voters the latest Raft configuration has, this node counted as
	// one (it leads). Fewer than 1+len(Views) is taken as 1+len(Views).
	Voters int
	// Views holds one view per other voter, answered or not.
	Views []Vantage
}

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
// with a node-to-node request to each). It returns, within ctx's deadline, the number of
// voters and one Vantage per other voter, or an error when the voters are not known (the
// configuration could not be read: the confirmation is inconclusive). It must be safe
// for concurrent use.
type Confirmer interface {
	Confirm(ctx context.Context, req ProbeRequest) (Confirmation, error)
}

// verdict is the outcome of a confirmation.
type verdict int

const (
	// verdictConfirmed: a majority of the voters saw the transition; it is queued.
	verdictConfirmed verdict = iota
	// verdictOverruled: so many voters saw otherwise that no majority can see it.
	verdictOverruled
	// verdictInconclusive: too few voters answered for a majority either way.
	verdictInconclusive
)

func (v verdict) String() string {
	switch v {
	case verdictConfirmed:
		return "confirmed"
	case verdictOverruled:
		return "overruled"
	default:
		return "inconclusive"
	}
}

// Reasons of roster_health_confirm_inconclusive_total.
const (
	// inconclusiveUnanswered: too few voters answered in time.
	inconclusiveUnanswered = "unanswered"
	// inconclusiveConfiguration: the voters could not be listed.
	inconclusiveConfiguration = "configuration"
)

// decide counts a confirmation among voters (this node included): agree of them saw the
// transition (this node included) and disagree saw otherwise; the others did not answer.
// The transition is confirmed when agree is a majority of the voters, overruled when
// agree cannot become one even if every voter that did not answer had agreed, and
// inconclusive otherwise.
func decide(voters, agree, disagree int) verdict {
	quorum := voters/2 + 1
	unanswered := max(voters-agree-disagree, 0)
	switch {
	case agree >= quorum:
		return verdictConfirmed
	case agree+unanswered < quorum:
		return verdictOverruled
	default:
		return verdictInconclusive
	}
}

// inconclusiveLogEvery is the least time between two log lines of inconclusive
// confirmations (the metric counts them all).
const inconclusiveLogEvery = 10 * time.Second

// confirmSlack is how long a confirmation may take beyond the check's timeout.
const confirmSlack = time.Second

// confirmResult is the answer to a confirmation the prober started.
type confirmResult struct {
	t       *target
	gen     uint64
	healthy bool // the transition asked about
	conf    Confirmation
	err     error // the voters could not be listed
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
		conf, err := p.cfg.Confirmer.Confirm(cctx, req)
		select {
		case p.confirmed <- confirmResult{t: t, gen: gen, healthy: healthy, conf: conf, err: err}:
		case <-ctx.Done():
		}
	})
}

// handleConfirm counts the answers to a confirmation: with a majority of the voters
// (this node included) agreeing, the transition is queued; otherwise it is dropped and
// the counters start again.
func (p *Prober) handleConfirm(ctx context.Context, r confirmResult, now time.Time) {
	t := r.t
	t.confirming = false
	if !p.current(t) || t.gen != r.gen {
		return
	}
	last := t.last()
	self := Vantage{Node: p.cfg.NodeID, Answered: true, Healthy: r.healthy, At: last.at,
		Outcome: last.outcome.class, Error: last.outcome.err, Latency: last.outcome.latency}
	t.state().vantages = append([]Vantage{self}, r.conf.Views...)
	voters, agree, disagree := max(r.conf.Voters, 1+len(r.conf.Views)), 1, 0
	for _, v := range r.conf.Views {
		switch {
		case !v.Answered:
		case v.Healthy == r.healthy:
			agree++
		default:
			disagree++
		}
	}
	if t.st.healthy != r.healthy {
		// The instance flipped back while the others were probing: nothing to commit.
		if t.pending() {
			p.confirm(ctx, t)
		}
		return
	}
	v, reason := decide(voters, agree, disagree), inconclusiveUnanswered
	if r.err != nil {
		v, reason = verdictInconclusive, inconclusiveConfiguration
	}
	switch v {
	case verdictConfirmed:
		p.log.Debug("health transition confirmed", "instance", refString(t.ref), "healthy", r.healthy,
			"agree", agree, "voters", voters)
		if t.pending() {
			p.markDirty(t, now)
		}
		return
	case verdictOverruled:
		p.met.overruled.Inc()
		p.log.Info("health transition overruled by the other voters: the committed health stands",
			"instance", refString(t.ref), "leader_saw_healthy", r.healthy, "agree", agree, "disagree", disagree, "voters", voters)
	case verdictInconclusive:
		p.met.inconclusive.WithLabelValues(reason).Inc()
		p.logInconclusive(now, t, r, reason, voters, agree, disagree)
	}
	t.st = hstate{healthy: t.committed}
}

// logInconclusive logs an inconclusive confirmation, at most once per
// inconclusiveLogEvery (the metric counts every one).
func (p *Prober) logInconclusive(now time.Time, t *target, r confirmResult, reason string, voters, agree, disagree int) {
	if !p.inconclusiveLogAt.IsZero() && now.Sub(p.inconclusiveLogAt) < inconclusiveLogEvery {
		p.inconclusiveSuppressed++
		return
	}
	suppressed := p.inconclusiveSuppressed
	p.inconclusiveLogAt, p.inconclusiveSuppressed = now, 0
	args := []any{"instance", refString(t.ref), "leader_saw_healthy", r.healthy, "reason", reason,
		"agree", agree, "disagree", disagree, "voters", voters, "not_logged_since_last", suppressed}
	if r.err != nil {
		args = append(args, "err", r.err)
	}
	p.log.Warn("health transition not confirmed: too few voters answered for a majority; "+
		"the committed health stands and the next probes decide (roster_health_confirm_inconclusive_total counts them all)", args...)
}
