package httpapi

import (
	"fmt"
	"net/http"

	"github.com/rosterhq/roster/api"
)

// getLeader serves GET /v1/status/leader from this node's view (503 no_leader when none).
func (s *server) getLeader(w http.ResponseWriter, r *http.Request) error {
	s.setLeaderHeaders(w, api.ConsistencyStale)
	l, ok := s.node.Leader()
	if !ok {
		return fmt.Errorf("%w: %s knows no leader", errNoLeader, s.id)
	}
	writeJSON(w, http.StatusOK, wireLeader(l))
	return nil
}

// getReady serves GET /v1/status/ready: 200 when this node knows a leader and has
// applied what it knows is committed, else 503; the body is api.Ready either way.
func (s *server) getReady(w http.ResponseWriter, _ *http.Request) error {
	s.setLeaderHeaders(w, api.ConsistencyStale)
	ok, rd := s.node.Ready()
	rd.Ready = ok
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, wireReady(rd))
	return nil
}
