package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/httpx"
)

// scopedLabels are the labels whose values are the registry's own names: a series that
// carries one tells which namespaces and services exist (roster_instances).
var scopedLabels = map[string]bool{"namespace": true, "group": true, "service": true}

// clusterWide gathers g's series without those that carry a scopedLabels label: what
// /metrics shows a caller that may not read the registry's names.
func clusterWide(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			kept := mf.Metric[:0]
			for _, m := range mf.Metric {
				if !hasScopedLabel(m) {
					kept = append(kept, m)
				}
			}
			if len(kept) > 0 {
				mf.Metric = kept
				out = append(out, mf)
			}
		}
		return out, err
	})
}

func hasScopedLabel(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if scopedLabels[l.GetName()] {
			return true
		}
	}
	return false
}

// metricsHandler serves /metrics while ACLs are on without --metrics-require-token:
// anyone gets the cluster-wide series; the per-namespace and per-service series
// (labels namespace, group, service) need a token with operator: read. A request
// without a token, or with one lacking operator: read, gets the cluster-wide series; a
// token the cluster does not know is a 401, as on every route.
func (s *server) metricsHandler() http.Handler {
	full := httpx.Handler(s.cfg.Metrics)
	limited := httpx.Handler(clusterWide(s.cfg.Metrics))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := httpx.TokenOf(r)
		if secret == "" {
			limited.ServeHTTP(w, r)
			return
		}
		a, err := s.reg.Authenticate(secret)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if a.Allows(acl.OperatorRead) {
			full.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}
