package raftnode

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Promotion of joined servers. A server that joins is added as a non-voter, so that it
// does not count towards the quorum before it holds the log: three joins of servers that
// never come up would otherwise turn a 3-voter cluster into a 6-voter one that needs 4
// votes and has 3. The leader promotes a non-voter that asked for a vote once it is
// healthy — its last successful AppendEntries is recent and it holds the leader's log
// but for at most MaxTrailingLogs entries — and has stayed healthy for PromoteAfter
// (Consul autopilot's server stabilization rule). One configuration change at a time,
// and none while an earlier one is uncommitted.
//
// Who asked for a vote lives in the leader's memory: a new leader learns it again from
// the joining server, which keeps sending its join until it is a voter (join.go).

// Defaults of Config.PromoteAfter and Config.MaxTrailingLogs.
const (
	DefaultPromoteAfter    = 10 * time.Second
	DefaultMaxTrailingLogs = 250
)

// promoter is the leader's record of the non-voters waiting for a vote.
type promoter struct {
	mu sync.Mutex
	// wanted maps a server id to the time it became healthy (zero while it is not).
	wanted map[string]time.Time
}

// want records whether server id waits for a vote.
func (p *promoter) want(id string, yes bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !yes {
		delete(p.wanted, id)
		return
	}
	if p.wanted == nil {
		p.wanted = make(map[string]time.Time)
	}
	if _, ok := p.wanted[id]; !ok {
		p.wanted[id] = time.Time{}
	}
}

// waiting reports whether id waits for a vote, and since when it has been healthy.
func (p *promoter) waiting(id string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	since, ok := p.wanted[id]
	return since, ok
}

// mark records when id became healthy (zero: it is not).
func (p *promoter) mark(id string, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.wanted[id]; ok {
		p.wanted[id] = since
	}
}

// restart forgets every stabilization under way: a new leader judges health itself.
func (p *promoter) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.wanted {
		p.wanted[id] = time.Time{}
	}
}

// promoteTick is how often the leader looks at the waiting non-voters.
func (n *Node) promoteTick() time.Duration {
	return min(max(n.cfg.PromoteAfter/10, 20*time.Millisecond), time.Second)
}

// promote runs for as long as this node leads (an OnLeadership callback).
func (n *Node) promote(ctx context.Context) {
	n.promo.restart()
	tick := time.NewTicker(n.promoteTick())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.promoteRound(ctx, time.Now())
	}
}

// promoteRound promotes at most one healthy, stable non-voter that waits for a vote.
func (n *Node) promoteRound(ctx context.Context, now time.Time) {
	servers, pending, err := n.configurationState(ctx)
	if err != nil || pending != 0 {
		return
	}
	last := n.raft.LastIndex()
	for _, s := range servers {
		if s.Suffrage != raft.Nonvoter {
			continue
		}
		id := string(s.ID)
		since, ok := n.promo.waiting(id)
		if !ok {
			continue
		}
		if !n.caughtUp(s.ID, last, now) {
			if !since.IsZero() {
				n.log.Info("a joining server is not healthy; its stabilization starts again", "id", id)
			}
			n.promo.mark(id, time.Time{})
			continue
		}
		if since.IsZero() {
			n.promo.mark(id, now)
			continue
		}
		if now.Sub(since) < n.cfg.PromoteAfter {
			continue
		}
		if err := n.await(ctx, n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.ApplyTimeout)); err != nil {
			n.log.Warn("promoting a server to voter failed; will retry", "id", id, "error", err)
			return
		}
		n.promo.want(id, false)
		n.log.Info("server promoted to voter", "id", id, "stable_for", now.Sub(since).Round(time.Millisecond))
		return
	}
}

// caughtUp reports whether the leader's last successful exchange with server id is
// recent and the server holds the leader's log up to last but MaxTrailingLogs entries.
func (n *Node) caughtUp(id raft.ServerID, last uint64, now time.Time) bool {
	match, lastOK := n.notify.peerHealth(id)
	return !lastOK.IsZero() && now.Sub(lastOK) <= n.contactThreshold() && match+n.cfg.MaxTrailingLogs >= last
}

// reachable reports whether the leader has heard from server id recently.
func (n *Node) reachable(id raft.ServerID) bool {
	_, lastOK := n.notify.peerHealth(id)
	return !lastOK.IsZero() && time.Since(lastOK) <= n.contactThreshold()
}

// contactThreshold is how old the last successful exchange with a server may be for it
// to count as healthy: the heartbeat timeout, ten heartbeat intervals.
func (n *Node) contactThreshold() time.Duration { return n.cfg.HeartbeatTimeout }
