package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// getLeader serves GET /v1/status/leader from this node's view (503 no_leader when none).
func (s *server) getLeader(w http.ResponseWriter, r *http.Request) error {
	httpx.SetLeaderHeaders(w, s.node, api.ConsistencyStale)
	l, ok := s.node.Leader()
	if !ok {
		return fmt.Errorf("%w: %s knows no leader", httpx.ErrNoLeader, s.id)
	}
	writeJSON(w, http.StatusOK, wireLeader(l))
	return nil
}

// getReady serves GET /v1/status/ready: 200 when this node knows a leader and has
// applied what it knows is committed, else 503; the body is api.Ready either way.
func (s *server) getReady(w http.ResponseWriter, _ *http.Request) error {
	httpx.SetLeaderHeaders(w, s.node, api.ConsistencyStale)
	ok, rd := s.node.Ready()
	if err := s.reg.ACLGate(); err != nil && rd.Reason == "" {
		ok, rd.Reason = false, err.Error()
	}
	rd.Ready = ok
	out := wireReady(rd)
	if s.cfg.StateChecks != nil {
		if chk, ok := s.cfg.StateChecks.LatestStateCheck(); ok {
			out.LastStateCheck = &api.StateCheck{Index: chk.Index, Hash: chk.Hash}
		}
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
	return nil
}

// StateChecker is what GET /v1/status/state-check reads: the hashes of the node's state
// taken at CheckState entries (*fsm.FSM).
type StateChecker interface {
	StateCheck(index uint64) (string, bool)
	// LatestStateCheck is the newest check this node recorded (ok false: none yet).
	LatestStateCheck() (fsm.StateCheck, bool)
}

// getStateCheck serves GET /v1/status/state-check?index=N: the hash of this node's state
// as of entry N, which every node takes at the same CheckState entries, so that nodes
// can compare. 404 when this node has not applied that check or no longer remembers it.
// Answered by the node that receives it, never forwarded.
func (s *server) getStateCheck(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("index")
	idx, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || idx == 0 {
		return model.Invalid("index", "must be the index of a state check (a positive integer), got %q", raw)
	}
	if s.cfg.StateChecks == nil {
		return fmt.Errorf("state check at %d: %w", idx, model.ErrNotFound)
	}
	sum, ok := s.cfg.StateChecks.StateCheck(idx)
	if !ok {
		return fmt.Errorf("no state check at index %d on this node (not applied yet, or forgotten): %w", idx, model.ErrNotFound)
	}
	writeJSON(w, http.StatusOK, api.StateCheck{Index: idx, Hash: sum})
	return nil
}
