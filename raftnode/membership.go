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
	// leader for this node's own entry, on the leader the time since it last heard
	// from the server (autopilot's view), and -1 when unknown.
	LastContact time.Duration
	// Build is the server's build as this node knows it (ServerBuilds).
	Build ServerBuild
}

// JoinRequest asks the leader to add a server to the cluster, or to update it.
type JoinRequest struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	// NonVoter keeps the server without a vote. Otherwise it joins without one too and is
	// promoted once it has caught up and stayed healthy (see promote.go).
	NonVoter bool
	// ClusterID is the joining server's cluster identity ("" for a server that has none
	// yet); another cluster's identity is refused.
	ClusterID string
	// Announce is a server re-announcing its own addresses: its suffrage is kept and no
	// promotion is requested.
	Announce bool
	// NewestCommand is the highest command type the server applies (model.Member).
	NewestCommand uint8
	// Version and Commit are the server's build (empty from releases before servers
	// reported them).
	Version string
	Commit  string
}

// Members lists the servers of the latest Raft configuration, sorted by id, with
// their HTTP addresses from the member table (empty when not recorded yet), the
// leader flag, the voter flag, and the last contact: 0 for the leader, the time since
// this node heard from the leader for this node's own entry, on the leader the time
// since it heard from each server, -1 otherwise.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	servers, err := n.configuration(ctx)
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	builds := map[string]ServerBuild{}
	if bs, err := n.ServerBuilds(); err == nil {
		for _, b := range bs {
			builds[b.ID] = b
		}
	}
	now := time.Now()
	out := make([]Member, 0, len(servers))
	for _, s := range servers {
		m := Member{
			ID:          string(s.ID),
			RaftAddr:    string(s.Address),
			Voter:       s.Suffrage == raft.Voter,
			Leader:      s.ID == leaderID,
			LastContact: -1,
			Build:       builds[string(s.ID)],
		}
		if m.Build.ID == "" {
			m.Build = ServerBuild{ID: m.ID, NewestCommand: uint8(fsm.LegacyNewestType)}
		}
		if rec, ok := n.member(m.ID); ok {
			m.HTTPAddr = rec.HTTPAddr
		}
		if m.ID == n.cfg.NodeID {
			m.HTTPAddr = n.cfg.HTTPAdvertise
			m.LastContact = n.LastContact()
		} else if age, ok := n.contactAge(s.ID, now); ok {
			m.LastContact = age
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
// member table. It runs on the leader only. The rules keep one request from costing
// the cluster its quorum or a working server:
//
//   - A new server is added as a non-voter. Unless it asked to stay one, it is
//     promoted to voter once it has caught up with the leader and stayed healthy for
//     the stabilization time (promote.go): a server that never catches up — a typo, a
//     fake — never counts towards the quorum.
//   - A join naming another cluster (ClusterID) is refused with ErrClusterMismatch.
//   - A Raft address already used by another server is refused with model.ErrConflict:
//     that server must be removed first.
//   - A server may move to a new address only while the leader cannot reach it at the
//     old one; a live server is never redirected.
//   - Any change to the configuration is refused with model.ErrConflict while an
//     earlier one is not committed.
//
// The same id and address again changes nothing (a non-voter asking to be a voter is
// queued for promotion). An announcement (Announce) only records addresses and keeps
// the server's suffrage. Every request tells the leader the server's build (ServerBuilds),
// and the record is written as every server stores it (Prepare) — not at all when the
// stored record is that already. Invalid requests fail with model.ErrInvalid.
func (n *Node) Join(ctx context.Context, req JoinRequest) error {
	m := model.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NewestCommand: req.NewestCommand}
	if err := model.ValidateMember(m); err != nil {
		return err
	}
	if req.ClusterID != "" {
		if err := model.ValidateClusterID(req.ClusterID); err != nil {
			return err
		}
	}
	if n.raft.State() != raft.Leader {
		return n.notLeaderErr(nil)
	}
	if req.ID == n.cfg.NodeID && req.RaftAddr != n.cfg.RaftAdvertise {
		return &model.ValidationError{Field: "raftAddr", Message: fmt.Sprintf("the leader %s is at %s, not %s", req.ID, n.cfg.RaftAdvertise, req.RaftAddr)}
	}
	if cur := n.ClusterID(); cur != "" && req.ClusterID != "" && req.ClusterID != cur {
		return fmt.Errorf("%w: server %s belongs to cluster %s; this is cluster %s", ErrClusterMismatch, req.ID, req.ClusterID, cur)
	}
	servers, pending, err := n.configurationState(ctx)
	if err != nil {
		return err
	}
	var existing *raft.Server
	for i, s := range servers {
		switch {
		case string(s.ID) == req.ID:
			existing = &servers[i]
		case string(s.Address) == req.RaftAddr:
			return fmt.Errorf("%w: raft address %s belongs to server %s; remove %s first (DELETE /v1/cluster/members/%s)",
				model.ErrConflict, req.RaftAddr, s.ID, s.ID, s.ID)
		}
	}
	id, addr := raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr)
	change := func(what string, f raft.IndexFuture) error {
		if pending != 0 {
			return fmt.Errorf("%w: the membership change at index %d is not committed yet; retry shortly", model.ErrConflict, pending)
		}
		if err := n.await(ctx, f); err != nil {
			return err
		}
		n.log.InfoContext(ctx, what, "id", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr)
		return nil
	}
	switch {
	case existing == nil && req.Announce:
		// An announcement never adds a server: one removed meanwhile (a dead server
		// autopilot cleaned up, restarted on its old data) stays removed.
		return fmt.Errorf("server %s is not in the configuration; it must join again: %w", req.ID, model.ErrNotFound)
	case existing == nil:
		err = change("server joined as a non-voter", n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout))
	case string(existing.Address) != req.RaftAddr:
		if n.reachable(existing.ID) {
			return fmt.Errorf("%w: server %s answers at %s; a server moves to a new address only once the leader cannot reach it at the old one",
				model.ErrConflict, req.ID, existing.Address)
		}
		if existing.Suffrage == raft.Voter {
			err = change("server moved to a new address", n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout))
		} else {
			err = change("server moved to a new address", n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout))
		}
	case !req.Announce && req.NonVoter && existing.Suffrage == raft.Voter:
		err = change("voter demoted to non-voter", n.raft.DemoteVoter(id, 0, n.cfg.ApplyTimeout))
	}
	if err != nil {
		return err
	}
	if !req.Announce {
		n.promo.want(req.ID, !req.NonVoter && (existing == nil || existing.Suffrage != raft.Voter))
	}
	n.commands.noteAnnouncement(ServerBuild{ID: req.ID, Version: req.Version, Commit: req.Commit, NewestCommand: req.NewestCommand})
	cmd, err := n.prepareOnce(fsm.UpsertMemberRequest{Member: m})
	if err != nil {
		return err
	}
	if rec, ok := n.member(req.ID); ok && rec == cmd.(fsm.UpsertMemberRequest).Member {
		return nil
	}
	_, err = n.Apply(ctx, cmd)
	return err
}

// configurationState returns the servers of the latest configuration and, when that
// configuration is not committed yet, its index (else 0).
func (n *Node) configurationState(ctx context.Context) ([]raft.Server, uint64, error) {
	f := n.raft.GetConfiguration()
	if err := n.await(ctx, f); err != nil {
		return nil, 0, err
	}
	var pending uint64
	if f.Index() > n.raft.CommitIndex() {
		pending = f.Index()
	}
	return f.Configuration().Servers, pending, nil
}

// RemoveServer removes a server from the Raft configuration and its member record.
// It runs on the leader only; an id that is neither a server nor a recorded member
// fails with model.ErrNotFound. Removing the leader itself makes it step down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeaderErr(nil)
	}
	servers, pending, err := n.configurationState(ctx)
	if err != nil {
		return err
	}
	if pending != 0 {
		return fmt.Errorf("%w: the membership change at index %d is not committed yet; retry shortly", model.ErrConflict, pending)
	}
	n.promo.want(id, false)
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
	servers, err := n.configuration(ctx)
	if err != nil {
		return err
	}
	if id == "" {
		for _, s := range servers {
			if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.NodeID {
				return n.await(ctx, n.raft.LeadershipTransfer())
			}
		}
		return fmt.Errorf("%w: there is no other voter to hand leadership to", model.ErrConflict)
	}
	for _, s := range servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			n.log.InfoContext(ctx, "transferring leadership", "to", id)
			return n.await(ctx, n.raft.LeadershipTransferToServer(s.ID, s.Address))
		}
	}
	return fmt.Errorf("voter %q: %w", id, model.ErrNotFound)
}
