package raftnode

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/model"
)

// Member is one server of the Raft configuration as this node sees it.
type Member struct {
	ID       string
	RaftAddr string
	// HTTPAddr is the server's HTTP address from the member table ("" when not recorded yet).
	HTTPAddr string
	Voter    bool
	Leader   bool
	// LastContact is 0 for the leader, the time since this node last heard from the
	// leader for this node's own entry, and -1 when unknown.
	LastContact time.Duration
}

// JoinRequest asks the leader to add a server to the cluster, or to update it.
type JoinRequest struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	// NonVoter adds (or keeps) the server without a vote.
	NonVoter bool
}

// Members lists the servers of the latest Raft configuration, sorted by id, with
// their HTTP addresses from the member table (empty when not recorded yet), the
// leader flag, the voter flag, and the last contact: 0 for the leader, the time since
// this node heard from the leader for this node's own entry, -1 otherwise.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	servers, err := n.configuration(ctx)
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	out := make([]Member, 0, len(servers))
	for _, s := range servers {
		m := Member{
			ID:          string(s.ID),
			RaftAddr:    string(s.Address),
			Voter:       s.Suffrage == raft.Voter,
			Leader:      s.ID == leaderID,
			LastContact: -1,
		}
		if rec, ok := n.member(m.ID); ok {
			m.HTTPAddr = rec.HTTPAddr
		}
		if m.ID == n.cfg.NodeID {
			m.HTTPAddr = n.cfg.HTTPAdvertise
			m.LastContact = n.LastContact()
		}
		if m.Leader {
			m.LastContact = 0
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// configuration returns the servers of the latest (possibly uncommitted) configuration.
func (n *Node) configuration(ctx context.Context) ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := n.await(ctx, f); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// Join adds a server to the cluster, or updates it, and records its addresses in the
// member table. It runs on the leader only. A server already present with the same
// id and address keeps its place (a voter/non-voter change is applied); one present
// with another address is removed and added again; another server at the same
// address is removed. Invalid requests fail with model.ErrInvalid.
func (n *Node) Join(ctx context.Context, req JoinRequest) error {
	m := model.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr}
	if err := model.ValidateMember(m); err != nil {
		return err
	}
	if n.raft.State() != raft.Leader {
		return n.notLeaderErr(nil)
	}
	if req.ID == n.cfg.NodeID && req.RaftAddr != n.cfg.RaftAdvertise {
		return &model.ValidationError{Field: "raftAddr", Message: fmt.Sprintf("the leader %s is at %s, not %s", req.ID, n.cfg.RaftAdvertise, req.RaftAddr)}
	}
	servers, err := n.configuration(ctx)
	if err != nil {
		return err
	}
	var existing *raft.Server
	for i, s := range servers {
		switch {
		case string(s.ID) == req.ID:
			existing = &servers[i]
		case string(s.Address) == req.RaftAddr:
			n.log.Info("removing server whose address a joining server now uses", "removed", s.ID, "joining", req.ID, "addr", req.RaftAddr)
			if err := n.removeServer(ctx, string(s.ID), true); err != nil {
				return err
			}
		}
	}
	if existing != nil && string(existing.Address) != req.RaftAddr {
		n.log.Info("server rejoins at a new address", "id", req.ID, "old", existing.Address, "new", req.RaftAddr)
		if err := n.await(ctx, n.raft.RemoveServer(existing.ID, 0, n.cfg.ApplyTimeout)); err != nil {
			return err
		}
		existing = nil
	}
	id, addr := raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr)
	switch {
	case existing == nil && req.NonVoter:
		err = n.await(ctx, n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout))
	case existing == nil || (!req.NonVoter && existing.Suffrage != raft.Voter):
		err = n.await(ctx, n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout))
	case req.NonVoter && existing.Suffrage == raft.Voter:
		err = n.await(ctx, n.raft.DemoteVoter(id, 0, n.cfg.ApplyTimeout))
	}
	if err != nil {
		return err
	}
	if existing == nil {
		n.log.Info("server joined", "id", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr, "voter", !req.NonVoter)
	}
	_, err = n.Apply(ctx, fsm.UpsertMemberRequest{Member: m})
	return err
}

// RemoveServer removes a server from the Raft configuration and its member record.
// It runs on the leader only; an id that is neither a server nor a recorded member
// fails with model.ErrNotFound. Removing the leader itself makes it step down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeaderErr(nil)
	}
	servers, err := n.configuration(ctx)
	if err != nil {
		return err
	}
	inConfig := false
	for _, s := range servers {
		if string(s.ID) == id {
			inConfig = true
		}
	}
	_, recorded := n.member(id)
	if !inConfig && !recorded {
		return fmt.Errorf("server %q: %w", id, model.ErrNotFound)
	}
	if id == n.cfg.NodeID {
		// This node stops being leader once the change commits: forget the record first.
		if _, err := n.Apply(ctx, fsm.RemoveMemberRequest{ID: id}); err != nil {
			return err
		}
		return n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout))
	}
	return n.removeServer(ctx, id, inConfig)
}

// removeServer removes id from the configuration (when inConfig) and from the member
// table. The configuration change comes first: a removed server no longer receives
// entries, so it never sees its record vanish and never asks to be added back.
func (n *Node) removeServer(ctx context.Context, id string, inConfig bool) error {
	if inConfig {
		if err := n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
			return err
		}
	}
	_, err := n.Apply(ctx, fsm.RemoveMemberRequest{ID: id})
	return err
}

// TransferLeadership hands leadership to the server id (any up-to-date voter when id
// is empty) and waits until the transfer finished. It runs on the leader only; an id
// that is not a voter fails with model.ErrNotFound; this node's own id is a no-op.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeaderErr(nil)
	}
	if id == n.cfg.NodeID {
		return nil
	}
	if id == "" {
		return n.await(ctx, n.raft.LeadershipTransfer())
	}
	servers, err := n.configuration(ctx)
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			n.log.Info("transferring leadership", "to", id)
			return n.await(ctx, n.raft.LeadershipTransferToServer(s.ID, s.Address))
		}
	}
	return fmt.Errorf("voter %q: %w", id, model.ErrNotFound)
}
