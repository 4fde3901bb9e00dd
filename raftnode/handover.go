package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Handing leadership over before a node stops. A leader that simply exits leaves the
// cluster without a leader for an election timeout and answers its in-flight writes
// with "leadership lost" (outcome unknown). Handover instead
//
//  1. stops taking new writes: Apply answers ErrNotLeader, so the API sends them on
//     to the next leader once one is known (a request waits for that, up to its
//     leader hold), and nothing new enters this node's log;
//  2. waits until the writes already submitted are answered (committed and applied,
//     or failed), so no client is left with an unknown outcome;
//  3. transfers leadership to the voter that holds most of the log among those the
//     leader heard from recently (Raft's TimeoutNow: it starts its election at once
//     instead of waiting for a timeout), and waits until this node knows the new
//     leader, so the requests it still holds can be forwarded there.
//
// The node keeps running Raft as a follower afterwards; the caller shuts it down once
// its API has drained.

// writeGate counts the writes submitted to Raft and closes the door to new ones.
type writeGate struct {
	mu       sync.Mutex
	inflight int
	drained  chan struct{} // nil while open; closed once no admitted write is left
}

// enter admits one write; false once the gate is closed.
func (g *writeGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained != nil {
		return false
	}
	g.inflight++
	return true
}

// leave records that an admitted write was answered.
func (g *writeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if g.inflight == 0 && g.drained != nil {
		close(g.drained)
	}
}

// close refuses new writes and returns a channel closed once every admitted write was
// answered.
func (g *writeGate) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained == nil {
		g.drained = make(chan struct{})
		if g.inflight == 0 {
			close(g.drained)
		}
	}
	return g.drained
}

// isClosed reports whether the gate refuses writes.
func (g *writeGate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.drained != nil
}

// errHandingOver is the cause of ErrNotLeader for writes refused during a handover.
var errHandingOver = errors.New("this node is stopping and hands leadership over")

// Handover prepares this node to stop (see above): from then on it takes no writes. On
// the leader it waits for the writes in flight, moves leadership and returns the new
// leader's id; elsewhere it returns "" at once, as it does when no other voter is in
// contact (a single-node cluster, or the others are down). ctx bounds the whole
// handover; an error leaves this node stopping without a handover, which Raft survives
// with an election.
func (n *Node) Handover(ctx context.Context) (string, error) {
	idle := n.gate.close()
	if n.isClosed() || n.raft.State() != raft.Leader {
		return "", nil
	}
	select {
	case <-idle:
	case <-ctx.Done():
		return "", fmt.Errorf("raftnode: handover: waiting for the writes in flight: %w", n.ctxErr(ctx))
	}
	target, ok, err := n.handoverTarget(ctx)
	if err != nil || !ok {
		if err == nil {
			n.log.Warn("stopping without handing leadership over: no other voter is in contact")
		}
		return "", err
	}
	n.log.Info("handing leadership over before stopping", "to", target.ID)
	start := time.Now()
	if err := n.await(ctx, n.raft.LeadershipTransferToServer(target.ID, target.Address)); err != nil {
		return "", fmt.Errorf("raftnode: handover to %s: %w", target.ID, err)
	}
	// This node no longer leads; it learns the new leader from its first heartbeat,
	// which follows the target's election at once. Without one within an election
	// timeout the target did not take over (it may be stopping too, as when a whole
	// cluster is stopped): the others elect a leader without this node's help.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	heard := time.NewTimer(2 * n.cfg.ElectionTimeout)
	defer heard.Stop()
	for {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.NodeID {
			n.log.Info("leadership handed over", "to", id, "took", time.Since(start).Round(time.Millisecond))
			return string(id), nil
		}
		select {
		case <-tick.C:
		case <-heard.C:
			return "", fmt.Errorf("raftnode: handover to %s: no new leader within %s", target.ID, 2*n.cfg.ElectionTimeout)
		case <-ctx.Done():
			return "", fmt.Errorf("raftnode: handover to %s: waiting for the new leader: %w", target.ID, n.ctxErr(ctx))
		}
	}
}

// handoverTarget picks the voter to hand leadership to: among the voters other than
// this node that the leader heard from within the contact threshold, the one whose log
// matches the leader's furthest (it needs the fewest entries before it can take over).
func (n *Node) handoverTarget(ctx context.Context) (raft.Server, bool, error) {
	servers, err := n.configuration(ctx)
	if err != nil {
		return raft.Server{}, false, err
	}
	var best raft.Server
	var bestMatch uint64
	found := false
	for _, s := range servers {
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.NodeID || !n.reachable(s.ID) {
			continue
		}
		match := n.notify.peerHealth(s.ID).Match
		if !found || match > bestMatch {
			best, bestMatch, found = s, match, true
		}
	}
	return best, found, nil
}
