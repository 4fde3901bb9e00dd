package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/store"
)

// listMembers serves GET /v1/cluster/members (from the leader unless ?consistency=stale).
// The index is the member table's; a blocking query waits on it.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request) error {
	idx, err := s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		idx, _, err := s.store.Members(ws)
		return idx, err
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	members, err := s.node.Members(ctx)
	if err != nil {
		return err
	}
	out := wireList(members, wireMember)
	if detail, err := boolParam(r, "detail"); err != nil {
		return err
	} else if detail {
		s.memberStatuses(ctx, out)
	}
	writeJSON(w, http.StatusOK, api.MembersResponse{Index: idx, Members: out})
	return nil
}

// memberStatusTimeout bounds how long a members list with detail waits for each member.
const memberStatusTimeout = 2 * time.Second

// memberStatuses fills each member's Status: this node's own readiness, and every
// other member's as it answers GET /v1/status/ready, asked all at once, each within
// memberStatusTimeout. Lag is measured against this node's commit index.
func (s *server) memberStatuses(ctx context.Context, members []api.Member) {
	ready, self := s.node.Ready()
	ctx, cancel := context.WithTimeout(ctx, memberStatusTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range members {
		m := &members[i]
		if m.ID == s.id {
			rd := wireReady(self)
			rd.Ready = ready && s.reg.ACLGate() == nil
			m.Status = memberStatus(rd, self.CommitIndex)
			continue
		}
		if m.HTTPAddr == "" || s.cfg.PeerReady == nil {
			m.Status = &api.MemberStatus{Error: "no HTTP address recorded for this member"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd, err := s.cfg.PeerReady(ctx, m.HTTPAddr)
			if err != nil {
				m.Status = &api.MemberStatus{Error: httpx.Message(err)}
				return
			}
			m.Status = memberStatus(rd, self.CommitIndex)
		}()
	}
	wg.Wait()
}

// memberStatus is a member's readiness with its lag behind commit.
func memberStatus(rd api.Ready, commit uint64) *api.MemberStatus {
	st := &api.MemberStatus{Reachable: true, Ready: rd.Ready, AppliedIndex: rd.AppliedIndex, CommitIndex: rd.CommitIndex,
		Reason: rd.Reason, ReasonCode: rd.ReasonCode, Build: rd.Build}
	if commit > rd.AppliedIndex {
		st.Lag = commit - rd.AppliedIndex
	}
	return st
}

// join serves POST /v1/cluster/join: add (or re-announce) a server. Leader only.
func (s *server) join(w http.ResponseWriter, r *http.Request) error {
	var req api.JoinRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	m := model.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr}
	if err := model.ValidateMember(m); err != nil {
		return err
	}
	if req.ClusterID != "" {
		if err := model.ValidateClusterID(req.ClusterID); err != nil {
			return err
		}
	}
	join := raftnode.JoinRequest{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, NonVoter: req.NonVoter,
		ClusterID: req.ClusterID, Announce: req.Announce, NewestCommand: req.NewestCommand, Version: req.Version, Commit: req.Commit}
	return s.membership(w, r, func(ctx context.Context) error { return s.node.Join(ctx, join) })
}

// removeMember serves DELETE /v1/cluster/members/{id}. Leader only.
func (s *server) removeMember(w http.ResponseWriter, r *http.Request) error {
	id := pathParam(r, "id")
	if err := validateMemberID(id); err != nil {
		return err
	}
	return s.membership(w, r, func(ctx context.Context) error { return s.node.RemoveServer(ctx, id) })
}

// transferLeadership serves POST /v1/cluster/leadership-transfer?id= (any server when
// id is empty). Leader only.
func (s *server) transferLeadership(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id != "" {
		if err := validateMemberID(id); err != nil {
			return err
		}
	}
	return s.membership(w, r, func(ctx context.Context) error { return s.node.TransferLeadership(ctx, id) })
}

// membership runs a membership change within the request timeout and answers
// api.WriteResult with the member table's index afterwards.
func (s *server) membership(w http.ResponseWriter, r *http.Request, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return err
	}
	idx, _, err := s.store.Members(nil)
	if err != nil {
		return err
	}
	writeResult(w, idx)
	return nil
}

// validateMemberID checks a server id the way the member table does.
func validateMemberID(id string) error {
	var ve *model.ValidationError
	err := model.ValidateMember(model.Member{ID: id, RaftAddr: "127.0.0.1:1"})
	if errors.As(err, &ve) && ve.Field == "id" {
		return err
	}
	return nil
}
