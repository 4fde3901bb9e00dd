package httpapi

import (
	"fmt"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
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
	rd.Ready = ok
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, wireReady(rd))
	return nil
}
