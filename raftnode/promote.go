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
// healthy by autopilot's rule (autopilot.go: the leader heard from it recently, its
// last entry is of the leader's term and it holds the leader's log but for at most
// MaxTrailingLogs entries) and has stayed healthy for PromoteAfter (Consul autopilot's
// server stabilization rule); the autopilot health view shows it as "promoting" until
// then. One configuration change per round of the leader's autopilot loop, and none
// while an earlier one is uncommitted (hashicorp/raft queues it).
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
	mu     sync.Mutex
	wanted map[string]bool
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
		p.wanted = make(map[string]bool)
	}
	p.wanted[id] = true
}

// list returns the ids of the servers waiting for a vote.
func (p *promoter) list() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.wanted))
	for id := range p.wanted {
		out[id] = true
	}
	return out
}

// promoteRound promotes at most one non-voter of h that waits for a vote and has been
// healthy for PromoteAfter; it reports whether it changed the configuration.
func (n *Node) promoteRound(ctx context.Context, h ClusterHealth, now time.Time) bool {
	for _, s := range h.Servers {
		if s.Status != StatusPromoting || !s.Healthy || now.Sub(s.StableSince) < n.cfg.PromoteAfter {
			continue
		}
		err := n.await(ctx, n.raft.AddVoter(raft.ServerID(s.ID), raft.ServerAddress(s.RaftAddr), 0, n.cfg.ApplyTimeout))
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("promoting a server to voter failed; will retry", "id", s.ID, "error", err)
			}
			return true
		}
		n.promo.want(s.ID, false)
		n.log.Info("server promoted to voter", "id", s.ID, "stable_for", now.Sub(s.StableSince).Round(time.Millisecond))
		return true
	}
	return false
}

// reachable reports whether the leader has heard from server id within the
// last-contact threshold.
func (n *Node) reachable(id raft.ServerID) bool {
	age, ok := n.contactAge(id, time.Now())
	return ok && age <= n.contactThreshold()
}

// contactThreshold is how old the last successful exchange with a server may be for it
// to count as healthy (AutopilotConfig.LastContactThreshold).
func (n *Node) contactThreshold() time.Duration { return n.cfg.Autopilot.LastContactThreshold }
