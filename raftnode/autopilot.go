package raftnode

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Autopilot is the leader's view of every server's health, after Consul's autopilot
// (hashicorp/raft-autopilot), and what the leader does with it: it promotes joined
// non-voters once they are stable (promote.go) and, when enabled, removes dead servers.
//
// The leader asks no one: the commit notifier (commitnotify.go) sees every
// AppendEntries the leader sends and its answer, so it knows, for every server, the
// last entry it holds and when it last answered. A server is healthy when the leader
// heard from it within LastContactThreshold, its last entry is of the leader's term,
// and it lacks at most MaxTrailingLogs of the leader's entries; the leader itself is
// healthy. StableSince is when a server's health last changed (when it became healthy,
// for a healthy one); a new leader starts every server's stability afresh. The
// failure tolerance is how many healthy voters beyond a quorum there are.
//
// Dead-server cleanup (off unless CleanupDeadServers): a server out of contact for
// longer than DeadServerThreshold is dead; each round the leader removes at most one,
// through RemoveServer, by the rules of decideCleanup (autopilot_rules.go): never the
// leader, never below MinQuorum voters, never unless the healthy voters stay a quorum.
// A removed server is not added back by anything it does: it is no longer in the
// configuration, so it never announces itself (join.go), and, dead when it was removed,
// a restart with its old data directory does not join again (it still sees itself as a
// voter); it must be started with an empty data directory and --join. (A server that
// learned of its removal and still has Join set asks to join at its start, as a joining
// server does until it is a voter: newNode.)

// Defaults of AutopilotConfig.
const (
	DefaultDeadServerThreshold = 5 * time.Minute
	DefaultMinQuorum           = 3
)

// AutopilotConfig configures the leader's server health and dead-server cleanup. The
// stabilization time and the trailing-logs limit are Config.PromoteAfter and
// Config.MaxTrailingLogs.
type AutopilotConfig struct {
	// LastContactThreshold is how long the leader may go without a successful exchange
	// with a server that it still counts as healthy (default: Config.HeartbeatTimeout,
	// the time a follower waits for the leader before calling an election). It must be
	// at least HeartbeatTimeout/5, the longest gap between two heartbeats.
	LastContactThreshold time.Duration
	// CleanupDeadServers lets the leader remove dead servers.
	CleanupDeadServers bool
	// DeadServerThreshold is how long a server must have been out of contact to be
	// dead (default DefaultDeadServerThreshold; at least LastContactThreshold).
	DeadServerThreshold time.Duration
	// MinQuorum is the fewest voters a removal may leave (default DefaultMinQuorum).
	MinQuorum int
}

// fill applies the defaults and checks the settings against the heartbeat timeout.
func (a *AutopilotConfig) fill(heartbeat time.Duration) error {
	if a.LastContactThreshold < 0 {
		return configErr("Autopilot.LastContactThreshold", "must not be negative")
	}
	if a.DeadServerThreshold < 0 {
		return configErr("Autopilot.DeadServerThreshold", "must not be negative")
	}
	if a.MinQuorum < 0 {
		return configErr("Autopilot.MinQuorum", "must not be negative")
	}
	if a.LastContactThreshold == 0 {
		a.LastContactThreshold = heartbeat
	}
	if a.DeadServerThreshold == 0 {
		a.DeadServerThreshold = max(DefaultDeadServerThreshold, a.LastContactThreshold)
	}
	if a.MinQuorum == 0 {
		a.MinQuorum = DefaultMinQuorum
	}
	if a.LastContactThreshold < heartbeat/5 {
		return configErr("Autopilot.LastContactThreshold", "%s is shorter than the gap between two heartbeats, up to %s (the heartbeat timeout %s / 5)",
			a.LastContactThreshold, heartbeat/5, heartbeat)
	}
	if a.DeadServerThreshold < a.LastContactThreshold {
		return configErr("Autopilot.DeadServerThreshold", "%s must be at least the last-contact threshold (%s)", a.DeadServerThreshold, a.LastContactThreshold)
	}
	return nil
}

// ServerStatus is a server's place in the configuration as autopilot shows it.
type ServerStatus string

// Server statuses.
const (
	StatusLeader   ServerStatus = "leader"
	StatusVoter    ServerStatus = "voter"
	StatusNonVoter ServerStatus = "non-voter"
	// StatusPromoting is a non-voter that waits for a vote (it joined without
	// --non-voter): the leader promotes it once it has been healthy for PromoteAfter.
	StatusPromoting ServerStatus = "promoting"
)

// ServerHealth is one server's health as the leader sees it.
type ServerHealth struct {
	ID       string
	RaftAddr string
	// HTTPAddr is the server's HTTP address from the member table ("" when not recorded).
	HTTPAddr string
	Leader   bool
	Voter    bool
	Status   ServerStatus
	Healthy  bool
	// LastContact is the time since the leader's last successful exchange with the
	// server: 0 for the leader, -1 when there was none since this node took leadership.
	LastContact time.Duration
	// LastTerm and LastIndex are the term and index of the last entry the server holds,
	// as far as the leader knows (0 when it accepted none from this leader yet).
	LastTerm  uint64
	LastIndex uint64
	// TrailingLogs is how many of the leader's entries the server lacks.
	TrailingLogs uint64
	// StableSince is when the server's health last changed, or when this leader began
	// tracking it.
	StableSince time.Time
	// Reason explains an unhealthy server, a non-voter waiting for a vote and a dead
	// server ("" for a healthy voter).
	Reason string
	// Build is the server's build as the leader knows it (AutopilotHealth only).
	Build ServerBuild
}

// AutopilotSettings are the rules in force on the leader.
type AutopilotSettings struct {
	LastContactThreshold    time.Duration
	MaxTrailingLogs         uint64
	ServerStabilizationTime time.Duration
	CleanupDeadServers      bool
	DeadServerThreshold     time.Duration
	MinQuorum               int
}

// ClusterHealth is the leader's view of every server of the latest configuration.
type ClusterHealth struct {
	// Healthy is true when every server is.
	Healthy bool
	// FailureTolerance is how many healthy voters may fail before the rest are no quorum.
	FailureTolerance int
	Leader           string
	Voters           []string // sorted
	Servers          []ServerHealth
	Settings         AutopilotSettings
}

// AutopilotMetrics are autopilot's counters and the leader's latest evaluation.
type AutopilotMetrics struct {
	// DeadServersRemoved counts the dead servers this node removed while leading.
	DeadServersRemoved uint64
	// DeadServersKept counts the dead voters this node kept because removing them
	// would break the minimum quorum or leave too few healthy voters (once per server
	// and stretch of being kept).
	DeadServersKept uint64
	// Leading is true when this node leads and evaluated the servers in its current
	// term; Healthy and FailureTolerance are then that evaluation's.
	Leading          bool
	Healthy          bool
	FailureTolerance int
}

// autopilot is the leader's memory of every server across evaluations. It starts
// afresh in every term this node leads.
type autopilot struct {
	mu      sync.Mutex
	term    uint64 // the term the state belongs to (0: none)
	start   time.Time
	servers map[string]*trackedServer
	last    ClusterHealth // the latest evaluation

	removed atomic.Uint64
	kept    atomic.Uint64
}

// trackedServer is what the leader remembers of one server.
type trackedServer struct {
	seen        time.Time // when this leader began tracking it
	healthy     bool
	stableSince time.Time
	kept        bool // a dead voter the cleanup rule keeps
}

// AutopilotHealth evaluates every server's health now. It runs on the leader only.
// Each server carries its build as the leader knows it, so a rolling upgrade's progress
// shows beside the servers' health.
func (n *Node) AutopilotHealth(ctx context.Context) (ClusterHealth, error) {
	h, _, err := n.evaluateServers(ctx, time.Now())
	if err != nil {
		return h, err
	}
	if builds, err := n.ServerBuilds(); err == nil {
		for i := range h.Servers {
			for _, b := range builds {
				if b.ID == h.Servers[i].ID {
					h.Servers[i].Build = b
				}
			}
		}
	}
	return h, nil
}

// AutopilotMetrics returns the counters and, while this node leads, its latest
// evaluation.
func (n *Node) AutopilotMetrics() AutopilotMetrics {
	m := AutopilotMetrics{DeadServersRemoved: n.pilot.removed.Load(), DeadServersKept: n.pilot.kept.Load()}
	term := n.raft.CurrentTerm()
	if !n.IsLeader() {
		return m
	}
	n.pilot.mu.Lock()
	defer n.pilot.mu.Unlock()
	if n.pilot.term == term {
		m.Leading, m.Healthy, m.FailureTolerance = true, n.pilot.last.Healthy, n.pilot.last.FailureTolerance
	}
	return m
}

// settings are the autopilot rules of this node's configuration.
func (n *Node) settings() AutopilotSettings {
	a := n.cfg.Autopilot
	return AutopilotSettings{
		LastContactThreshold: a.LastContactThreshold, MaxTrailingLogs: n.cfg.MaxTrailingLogs,
		ServerStabilizationTime: n.cfg.PromoteAfter, CleanupDeadServers: a.CleanupDeadServers,
		DeadServerThreshold: a.DeadServerThreshold, MinQuorum: a.MinQuorum,
	}
}

// leaderProgress is what the leader knows of server id now, from the commit notifier:
// the last entry it holds in the current term, and its last successful exchange in
// this leadership (the contact roster_raft_peer_last_contact_seconds reports too).
func (n *Node) leaderProgress(id raft.ServerID, term uint64) progress {
	pp := n.notify.peerHealth(id)
	if pp.Term != term {
		pp = peerProgress{}
	}
	p := progress{match: pp.Match, matchTerm: pp.MatchTerm}
	if c := n.notify.peerContact(id); !c.IsZero() && !c.Before(n.leadingSince()) {
		p.contact = c
	}
	return p
}

// leadingSince is when this node's current leadership began (now when the leadership
// observer has not recorded it yet: no contact counts before it does).
func (n *Node) leadingSince() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lead.active {
		return n.lead.since
	}
	return time.Now()
}

// contactAge is the time since the leader last heard from server id in its current
// term (ok false: not since it leads, or this node does not lead).
func (n *Node) contactAge(id raft.ServerID, now time.Time) (time.Duration, bool) {
	if !n.IsLeader() {
		return 0, false
	}
	p := n.leaderProgress(id, n.raft.CurrentTerm())
	if p.contact.IsZero() {
		return 0, false
	}
	return max(now.Sub(p.contact), 0), true
}

// evaluateServers judges every server of the latest configuration at now, updates
// what the leader remembers of them, and returns the health view with the dead-server
// decision (empty unless cleanup is enabled). Leader only.
func (n *Node) evaluateServers(ctx context.Context, now time.Time) (ClusterHealth, cleanupDecision, error) {
	if n.raft.State() != raft.Leader {
		return ClusterHealth{}, cleanupDecision{}, n.notLeaderErr(nil)
	}
	servers, err := n.configuration(ctx)
	if err != nil {
		return ClusterHealth{}, cleanupDecision{}, err
	}
	term := n.raft.CurrentTerm()
	lv := leaderView{term: term, lastIndex: n.raft.LastIndex()}
	prog := make(map[raft.ServerID]progress, len(servers))
	for _, s := range servers {
		if string(s.ID) != n.cfg.NodeID {
			prog[s.ID] = n.leaderProgress(s.ID, term)
		}
	}
	wanted := n.promo.list()

	a := &n.pilot
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.term != term {
		a.term, a.start, a.servers = term, now, map[string]*trackedServer{}
	}
	st := n.settings()
	rules := healthRules{lastContact: st.LastContactThreshold, maxTrailing: st.MaxTrailingLogs}
	h := ClusterHealth{Healthy: true, Leader: n.cfg.NodeID, Settings: st}
	inConfig := make(map[string]bool, len(servers))
	var candidates []cleanupServer
	for _, s := range servers {
		id := string(s.ID)
		inConfig[id] = true
		t := a.servers[id]
		if t == nil {
			t = &trackedServer{seen: now, stableSince: now}
			a.servers[id] = t
		}
		sh := ServerHealth{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		if rec, ok := n.member(id); ok {
			sh.HTTPAddr = rec.HTTPAddr
		}
		var healthy bool
		var reason string
		var contact time.Time
		if id == n.cfg.NodeID {
			sh.Leader, sh.HTTPAddr, sh.LastTerm, sh.LastIndex = true, n.cfg.HTTPAdvertise, lv.term, lv.lastIndex
			contact, healthy = now, true
		} else {
			p := prog[s.ID]
			contact = p.contact
			healthy, reason = judge(now, p, lv, rules, t.seen)
			sh.LastTerm, sh.LastIndex = p.matchTerm, p.match
			if lv.lastIndex > p.match {
				sh.TrailingLogs = lv.lastIndex - p.match
			}
		}
		sh.LastContact = -1
		if !contact.IsZero() {
			sh.LastContact = max(now.Sub(contact), 0)
		}
		if healthy != t.healthy && now.After(t.seen) {
			if healthy {
				n.log.Info("server is healthy", "id", id, "unhealthy_for", roundDur(now.Sub(t.stableSince)))
			} else {
				n.log.Warn("server is unhealthy", "id", id, "reason", reason)
			}
		}
		if healthy != t.healthy {
			t.healthy, t.stableSince = healthy, now
		}
		sh.Healthy, sh.StableSince, sh.Reason = healthy, t.stableSince, reason
		switch {
		case sh.Leader:
			sh.Status = StatusLeader
		case sh.Voter:
			sh.Status = StatusVoter
		case wanted[id]:
			sh.Status = StatusPromoting
			sh.Reason = joinReasons(sh.Reason, promotionNote(healthy, now.Sub(t.stableSince), st.ServerStabilizationTime))
		default:
			sh.Status = StatusNonVoter
		}
		if sh.Voter {
			h.Voters = append(h.Voters, id)
		}
		h.Healthy = h.Healthy && healthy
		out := time.Duration(0)
		if !healthy {
			out = now.Sub(t.seen)
			if !contact.IsZero() {
				out = now.Sub(contact)
			}
		}
		candidates = append(candidates, cleanupServer{ID: id, Voter: sh.Voter, Leader: sh.Leader, Healthy: healthy, OutOfContact: out})
		h.Servers = append(h.Servers, sh)
	}
	for id := range a.servers {
		if !inConfig[id] {
			delete(a.servers, id)
		}
	}
	healthyVoters := 0
	for _, sh := range h.Servers {
		if sh.Voter && sh.Healthy {
			healthyVoters++
		}
	}
	h.FailureTolerance = failureTolerance(len(h.Voters), healthyVoters)
	sort.Strings(h.Voters)
	sort.Slice(h.Servers, func(i, j int) bool { return h.Servers[i].ID < h.Servers[j].ID })

	var d cleanupDecision
	if st.CleanupDeadServers {
		d = decideCleanup(candidates, cleanupRules{threshold: st.DeadServerThreshold, minQuorum: st.MinQuorum})
		n.noteCleanup(&h, d)
	}
	a.last = h
	return h, d, nil
}

// noteCleanup adds the dead-server decision to the servers' reasons and counts the
// voters newly kept (a.mu held).
func (n *Node) noteCleanup(h *ClusterHealth, d cleanupDecision) {
	a := &n.pilot
	for i := range h.Servers {
		sh := &h.Servers[i]
		t := a.servers[sh.ID]
		why, kept := d.Kept[sh.ID]
		if kept && !t.kept {
			a.kept.Add(1)
			n.log.Warn("autopilot keeps a dead server", "id", sh.ID, "out_of_contact", roundDur(d.Dead[sh.ID]), "reason", why)
		}
		t.kept = kept
		out, dead := d.Dead[sh.ID]
		switch {
		case !dead:
		case kept:
			sh.Reason = joinReasons(sh.Reason, "dead (out of contact for more than "+h.Settings.DeadServerThreshold.String()+") but not removed: "+why)
		case d.Remove == sh.ID:
			sh.Reason = joinReasons(sh.Reason, "dead (out of contact for "+roundDur(out).String()+"); being removed")
		default:
			sh.Reason = joinReasons(sh.Reason, "dead (out of contact for "+roundDur(out).String()+"); removed in a later round")
		}
	}
}

// promotionNote says how far a non-voter waiting for a vote is from it.
func promotionNote(healthy bool, stable, need time.Duration) string {
	if !healthy {
		return "promoted to voter once healthy for " + need.String()
	}
	return "healthy for " + roundDur(stable).String() + " of the " + need.String() + " before promotion"
}

func joinReasons(a, b string) string {
	return strings.TrimPrefix(a+"; "+b, "; ")
}

// autopilotTick is how often the leader evaluates the servers: often enough to see a
// server pass the stabilization time and the last-contact threshold promptly.
func (n *Node) autopilotTick() time.Duration {
	return min(max(n.cfg.PromoteAfter/10, 20*time.Millisecond), max(n.cfg.Autopilot.LastContactThreshold/2, 20*time.Millisecond), time.Second)
}

// runAutopilot runs for as long as this node leads (an OnLeadership callback): every
// tick it evaluates the servers and makes at most one configuration change, a
// promotion first, else a dead server's removal.
func (n *Node) runAutopilot(ctx context.Context) {
	tick := time.NewTicker(n.autopilotTick())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		h, d, err := n.evaluateServers(ctx, now)
		if err != nil {
			continue
		}
		if n.promoteRound(ctx, h, now) {
			continue
		}
		if d.Remove != "" {
			n.removeDead(ctx, h, d)
		}
	}
}

// removeDead removes the dead server the round chose, through RemoveServer.
func (n *Node) removeDead(ctx context.Context, h ClusterHealth, d cleanupDecision) {
	voter := false
	for _, s := range h.Servers {
		if s.ID == d.Remove {
			voter = s.Voter
		}
	}
	out := roundDur(d.Dead[d.Remove])
	if err := n.RemoveServer(ctx, d.Remove); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("autopilot could not remove a dead server; will retry", "id", d.Remove, "error", err)
		}
		return
	}
	n.pilot.removed.Add(1)
	voters := len(h.Voters)
	if voter {
		voters--
	}
	n.log.Info("autopilot removed a dead server", "id", d.Remove, "voter", voter, "out_of_contact", out,
		"threshold", h.Settings.DeadServerThreshold, "voters_left", voters)
}
