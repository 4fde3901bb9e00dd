package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// listClusters serves GET .../services/{service}/clusters (404 if the service is missing).
func (s *server) listClusters(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	idx, list, err := readValueIn(s, w, r, key.Namespace, func(ws *store.WatchSet) (uint64, []model.Cluster, error) {
		return s.store.Clusters(ws, key)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ClustersResponse{Index: idx, Clusters: wireList(list, wireCluster)})
	return nil
}

// getCluster serves GET .../clusters/{cluster}.
func (s *server) getCluster(w http.ResponseWriter, r *http.Request) error {
	key, name, err := clusterParam(r)
	if err != nil {
		return err
	}
	idx, c, err := readValueIn(s, w, r, key.Namespace, func(ws *store.WatchSet) (uint64, model.Cluster, error) {
		return s.store.Cluster(ws, key, name)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ClusterResponse{Index: idx, Cluster: wireCluster(c)})
	return nil
}

// putCluster serves PUT .../clusters/{cluster}: create, or replace the health-check
// spec and metadata. Omitted health-check fields take the defaults.
func (s *server) putCluster(w http.ResponseWriter, r *http.Request) error {
	key, name, err := clusterParam(r)
	if err != nil {
		return err
	}
	var req api.ClusterRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	hc, err := healthCheckFromSpec(req.HealthCheck)
	if err != nil {
		return err
	}
	c := model.Cluster{
		Namespace: key.Namespace, Group: key.Group, Service: key.Service, Name: name,
		HealthCheck: hc, Metadata: req.Metadata,
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.UpsertCluster(r.Context(), c, cond))
}

// healthCheckFromSpec turns the wire spec into a model.HealthCheck with the defaults
// filled in, checked under the admission rules. The type is matched case-insensitively.
func healthCheckFromSpec(spec *api.HealthCheckSpec) (model.HealthCheck, error) {
	var hc model.HealthCheck
	if spec != nil {
		hc = model.HealthCheck{
			Type:           model.CheckType(strings.ToUpper(strings.TrimSpace(spec.Type))),
			Port:           spec.Port,
			Path:           spec.Path,
			Headers:        spec.Headers,
			ExpectedStatus: spec.ExpectedStatus,
			Rise:           spec.Rise,
			Fall:           spec.Fall,
			TLSServerName:  spec.TLSServerName,
			TLSSkipVerify:  spec.TLSSkipVerify,
			TLSCAPEM:       spec.TLSCAPEM,
			GRPCService:    spec.GRPCService,
			GRPCTLS:        spec.GRPCTLS,
			User:           spec.User,
			Password:       spec.Password,
			Query:          spec.Query,
			Confirm:        model.ConfirmMode(strings.ToLower(strings.TrimSpace(spec.Confirm))),
		}
		if hc.Confirm == model.ConfirmMajority {
			hc.Confirm = "" // the default is stored as ""
		}
		var err error
		if hc.Interval, err = parseSpecDuration("healthCheck.interval", spec.Interval); err != nil {
			return hc, err
		}
		if hc.Timeout, err = parseSpecDuration("healthCheck.timeout", spec.Timeout); err != nil {
			return hc, err
		}
		if hc.DeregisterAfter, err = parseSpecDuration("healthCheck.deregisterAfter", spec.DeregisterAfter); err != nil {
			return hc, err
		}
	}
	hc = hc.WithDefaults()
	return hc, model.AdmitHealthCheck(hc)
}

// parseSpecDuration parses a Go duration string ("" is 0: the default).
func parseSpecDuration(field, v string) (model.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, invalid(field, "must be a duration such as 5s, got %q", v)
	}
	return model.Duration(d), nil
}
