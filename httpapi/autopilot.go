package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/raftnode"
)

// AutopilotReporter is the leader's view of the servers' health (a *raftnode.Node).
type AutopilotReporter interface {
	// AutopilotHealth evaluates every server's health; leader only.
	AutopilotHealth(ctx context.Context) (raftnode.ClusterHealth, error)
}

// getAutopilotHealth serves GET /v1/operator/autopilot/health from the leader: every
// server's health, the failure tolerance and the autopilot settings in force.
func (s *server) getAutopilotHealth(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Autopilot == nil {
		return fmt.Errorf("%w: autopilot is not configured on %s", httpx.ErrUnavailable, s.id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	h, err := s.cfg.Autopilot.AutopilotHealth(ctx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireAutopilotHealth(h))
	return nil
}

func wireAutopilotHealth(h raftnode.ClusterHealth) api.AutopilotHealth {
	st := h.Settings
	voters := h.Voters
	if voters == nil {
		voters = []string{}
	}
	return api.AutopilotHealth{
		Healthy:          h.Healthy,
		FailureTolerance: h.FailureTolerance,
		Leader:           h.Leader,
		Voters:           voters,
		Servers:          wireList(h.Servers, wireAutopilotServer),
		Config: api.AutopilotHealthConfig{
			CleanupDeadServers:      st.CleanupDeadServers,
			LastContactThreshold:    st.LastContactThreshold.String(),
			MaxTrailingLogs:         st.MaxTrailingLogs,
			ServerStabilizationTime: st.ServerStabilizationTime.String(),
			DeadServerThreshold:     st.DeadServerThreshold.String(),
			MinQuorum:               st.MinQuorum,
		},
	}
}

func wireAutopilotServer(s raftnode.ServerHealth) api.AutopilotServer {
	lc, lcMillis := "never", int64(-1)
	if s.LastContact >= 0 {
		d := s.LastContact.Round(time.Millisecond)
		lc, lcMillis = d.String(), d.Milliseconds()
	}
	return api.AutopilotServer{
		ID:                s.ID,
		Address:           s.RaftAddr,
		HTTPAddr:          s.HTTPAddr,
		Leader:            s.Leader,
		Voter:             s.Voter,
		Status:            string(s.Status),
		Healthy:           s.Healthy,
		LastContact:       lc,
		LastContactMillis: lcMillis,
		LastTerm:          s.LastTerm,
		LastIndex:         s.LastIndex,
		TrailingLogs:      s.TrailingLogs,
		StableSince:       s.StableSince.UTC(),
		Reason:            s.Reason,
		Version:           s.Build.Version,
		NewestCommand:     s.Build.NewestCommand,
		Release:           s.Build.Release(),
	}
}
