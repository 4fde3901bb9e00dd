package httpapi

import (
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// getSettings serves GET /v1/operator/settings: the cluster-wide settings from the
// replicated state.
func (s *server) getSettings(w http.ResponseWriter, r *http.Request) error {
	idx, set, err := readValue(s, w, r, func(ws *store.WatchSet) (uint64, model.Settings, error) {
		return s.store.Settings(ws)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.SettingsResponse{Index: idx, Settings: wireSettings(set)})
	return nil
}

// putSettings serves PUT /v1/operator/settings: the fields given replace the current
// ones (read on the leader), the others are kept; the change is one Raft entry.
func (s *server) putSettings(w http.ResponseWriter, r *http.Request) error {
	var req api.SettingsRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.MetadataMaxBytes == nil {
		return invalid("metadataMaxBytes", "is required (the only setting so far)")
	}
	cur, err := s.reg.Settings()
	if err != nil {
		return err
	}
	cur.MetadataMaxBytes = *req.MetadataMaxBytes
	return written(w)(s.reg.UpdateSettings(r.Context(), cur))
}
