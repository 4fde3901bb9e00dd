package raftnode

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/model"
)

// Joiner sends a join request to the member whose HTTP address is target (host:port
// or a URL); any member accepts it and hands it to the leader. It returns nil once the
// request was accepted. The server wires in its API client (POST /v1/cluster/join);
// raftnode itself speaks no HTTP.
type Joiner func(ctx context.Context, target string, req JoinRequest) error

const (
	// joinRequestTimeout bounds one join request.
	joinRequestTimeout = 5 * time.Second
	joinRetryMin       = 100 * time.Millisecond
	joinRetryMax       = 5 * time.Second
	// registrarInterval is how often a follower compares its member record with its
	// own addresses.
	registrarInterval = 250 * time.Millisecond
)

// joinAtStart asks the member at target to add this node, retrying with backoff until
// the request is accepted or the node shuts down; then, unless the node stays a
// non-voter, it asks again every joinPromoteInterval until it is a voter, so that a
// leader elected meanwhile learns that it waits for a vote.
func (n *Node) joinAtStart(target string) {
	defer n.wg.Done()
	wait := joinRetryMin
	for attempt := 1; ; attempt++ {
		req := n.joinRequest(n.cfg.NonVoter)
		err := n.sendJoin(target, req)
		if err == nil {
			break
		}
		if n.ctx.Err() != nil {
			return
		}
		n.log.Warn("join request failed; retrying", "via", target, "attempt", attempt, "error", err, "retry_in", wait)
		if !sleepCtx(n.ctx, wait) {
			return
		}
		wait = min(wait*2, joinRetryMax)
	}
	n.log.Info("join request accepted", "via", target, "non_voter", n.cfg.NonVoter)
	if n.cfg.NonVoter {
		return
	}
	for !n.isVoter() {
		if !sleepCtx(n.ctx, joinPromoteInterval) {
			return
		}
		if n.isVoter() {
			break
		}
		// Through the leader when it is known (the join target may be gone).
		to := target
		if _, id := n.raft.LeaderWithID(); id != "" {
			if l, ok := n.member(string(id)); ok && l.HTTPAddr != "" {
				to = l.HTTPAddr
			}
		}
		req := n.joinRequest(false)
		if err := n.sendJoin(to, req); err != nil && n.ctx.Err() == nil {
			n.log.Debug("asking for a vote failed; retrying", "via", to, "error", err)
		}
	}
	n.log.Info("joined the cluster as a voter")
}

// joinPromoteInterval is how often a joined non-voter that wants a vote asks again.
const joinPromoteInterval = time.Second

// isVoter reports whether this node is a voter of its latest known configuration.
func (n *Node) isVoter() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

// joinRequest is this node's join request: its addresses, cluster id and build.
func (n *Node) joinRequest(nonVoter bool) JoinRequest {
	return JoinRequest{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAdvertise, HTTPAddr: n.cfg.HTTPAdvertise,
		NonVoter: nonVoter, ClusterID: n.knownClusterID(), NewestCommand: uint8(n.sm.NewestType()),
		Version: n.cfg.Build.Version, Commit: n.cfg.Build.Commit}
}

// announcedTo is the leadership a follower last announced itself to.
type announcedTo struct {
	leader raft.ServerID
	term   uint64
}

// runRegistrar keeps this node's member record current and tells every leader this
// node's build: while a leader other than this node is known, it sends the leader's
// HTTP address a join request with this node's addresses and build when the record is
// missing or holds other addresses, and once to every leadership (leader and term)
// anyway, so that each new leader learns which command types this node applies.
func (n *Node) runRegistrar() {
	defer n.wg.Done()
	wait := joinRetryMin
	next := registrarInterval
	for {
		if !sleepCtx(n.ctx, next) {
			return
		}
		next = registrarInterval
		target, req, to, ok := n.announcement()
		if !ok {
			continue
		}
		if err := n.sendJoin(target, req); err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.log.Warn("announcing member addresses to the leader failed; retrying", "leader", target, "error", err, "retry_in", wait)
			next = wait
			wait = min(wait*2, joinRetryMax)
			continue
		}
		n.log.Info("announced member addresses to the leader", "leader", target)
		n.announced.Store(&to)
		wait = joinRetryMin
	}
}

// announcement returns the leader's HTTP address, the request to send and the
// leadership it goes to when this follower needs to announce itself.
func (n *Node) announcement() (string, JoinRequest, announcedTo, bool) {
	var req JoinRequest
	if n.raft.State() != raft.Follower {
		return "", req, announcedTo{}, false
	}
	_, leaderID := n.raft.LeaderWithID()
	if leaderID == "" || string(leaderID) == n.cfg.NodeID {
		return "", req, announcedTo{}, false
	}
	to := announcedTo{leader: leaderID, term: n.raft.CurrentTerm()}
	if rec, ok := n.member(n.cfg.NodeID); ok && sameAddrs(rec, n.self()) {
		if last := n.announced.Load(); last != nil && *last == to {
			return "", req, announcedTo{}, false
		}
	}
	leader, ok := n.member(string(leaderID))
	if !ok || leader.HTTPAddr == "" {
		return "", req, announcedTo{}, false
	}
	// Only a server of the configuration announces itself, keeping its suffrage: a
	// removed server must not add itself back.
	var self *raft.Server
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", req, announcedTo{}, false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			self = &s
			break
		}
	}
	if self == nil {
		return "", req, announcedTo{}, false
	}
	req = n.joinRequest(self.Suffrage != raft.Voter)
	req.Announce = true
	return leader.HTTPAddr, req, to, true
}

// sameAddrs reports whether two member records hold the same addresses.
func sameAddrs(a, b model.Member) bool {
	return a.ID == b.ID && a.RaftAddr == b.RaftAddr && a.HTTPAddr == b.HTTPAddr
}

// sendJoin sends req to target through the configured Joiner, within
// joinRequestTimeout and until the node shuts down.
func (n *Node) sendJoin(target string, req JoinRequest) error {
	ctx, cancel := context.WithTimeout(n.ctx, joinRequestTimeout)
	defer cancel()
	return n.cfg.Joiner(ctx, target, req)
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
