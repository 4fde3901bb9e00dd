package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rosterhq/roster/acl"
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
	// Probe results are the namespace's data: the permission is derived from the key
	// read, as for every other read of it.
	if err := s.reg.Authorize(r.Context(), acl.NamespacePermission(key.Namespace, acl.Read)); err != nil {
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

// SingleProber runs one probe for a leader's majority confirmation (healthcheck.Manager).
type SingleProber interface {
	ProbeOnce(ctx context.Context, req healthcheck.ProbeRequest) healthcheck.Vantage
}

// probeForLeader serves POST /v1/cluster/probe: one probe of an instance with the
// check the leader sends, under this node's own probe policy, which the leader asks of
// every other voter before it commits a health transition of a cluster that confirms
// by majority. Served by the node that receives it, never forwarded; only nodes (a
// certificate of the cluster's CA) or operators (operator: write) may ask.
func (s *server) probeForLeader(w http.ResponseWriter, r *http.Request) error {
	var req healthcheck.ProbeRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := model.ValidateHealthCheck(req.Check); err != nil {
		return err
	}
	if err := model.ValidateIP(req.IP); err != nil {
		return err
	}
	if err := model.ValidatePort(req.Port); err != nil {
		return err
	}
	if s.cfg.Prober == nil {
		return fmt.Errorf("%w: health probing is not configured on %s", httpx.ErrUnavailable, s.id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), req.Check.Timeout.D()+time.Second)
	defer cancel()
	v := s.cfg.Prober.ProbeOnce(ctx, req)
	v.Node = s.id
	writeJSON(w, http.StatusOK, wireVantage(v))
	return nil
}
