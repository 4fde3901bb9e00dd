package httpapi

import (
	"fmt"
	"net/http"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/healthcheck"
	"github.com/rosterhq/roster/httpx"
	"github.com/rosterhq/roster/model"
)

// HealthResults is the leader's in-memory view of its last probes (a *healthcheck.Manager).
type HealthResults interface {
	// Results returns the last probe result of every probed instance of the service,
	// and whether a prober is running on this node.
	Results(key model.ServiceKey) ([]healthcheck.Result, bool)
}

// getHealth serves GET .../services/{service}/health from the leader: the last probe of
// each of the service's instances (time, latency, outcome, error text, consecutive
// counts). The service must exist.
func (s *server) getHealth(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	// The service must exist; its clusters are the cheapest read that says so.
	if _, _, err := s.store.Clusters(nil, key); err != nil {
		return err
	}
	if s.cfg.Health == nil {
		return fmt.Errorf("%w: health probing is not configured on %s", httpx.ErrUnavailable, s.id)
	}
	results, running := s.cfg.Health.Results(key)
	writeJSON(w, http.StatusOK, api.HealthResponse{
		Namespace: key.Namespace, Group: key.Group, Service: key.Service,
		Leader: s.id, Probing: running, Results: wireList(results, wireProbeResult),
	})
	return nil
}

// getProbePolicy serves GET /v1/operator/probe-policy: the probe target policy of the
// node that answers (never forwarded; a node applies its own policy while it leads, so
// every node should be given the same one).
func (s *server) getProbePolicy(w http.ResponseWriter, _ *http.Request) error {
	p := s.cfg.ProbePolicy
	writeJSON(w, http.StatusOK, api.ProbePolicyResponse{Node: s.id, Allow: p.Allow(), Deny: p.Deny()})
	return nil
}
