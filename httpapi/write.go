package httpapi

import (
	"context"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/fsm"
)

// apply replicates one validated command through the Raft log within the request
// timeout and answers 200 api.WriteResult with X-Roster-Index. Callers validate their
// input first, so invalid input never reaches the log.
func (s *server) apply(w http.ResponseWriter, r *http.Request, t fsm.MessageType, msg any) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	idx, err := s.node.Apply(ctx, t, msg)
	if err != nil {
		return err
	}
	writeResult(w, idx)
	return nil
}

// writeResult answers a successful write applied at idx.
func writeResult(w http.ResponseWriter, idx uint64) {
	setIndex(w, idx)
	writeJSON(w, http.StatusOK, api.WriteResult{Index: idx})
}
