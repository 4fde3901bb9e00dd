package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// instanceFilter is the query of GET .../instances.
type instanceFilter struct {
	// healthy is nil for "all instances".
	healthy  *bool
	clusters map[string]bool
}

// parseInstanceFilter parses ?healthy= and ?cluster=a,b.
func parseInstanceFilter(r *http.Request) (instanceFilter, error) {
	var f instanceFilter
	q := r.URL.Query()
	if v := q.Get("healthy"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, invalid("healthy", "must be true or false, got %q", v)
		}
		f.healthy = &b
	}
	for _, v := range q["cluster"] {
		for _, c := range strings.Split(v, ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				continue
			}
			if err := model.ValidateClusterName(c); err != nil {
				return f, err
			}
			if f.clusters == nil {
				f.clusters = map[string]bool{}
			}
			f.clusters[c] = true
		}
	}
	return f, nil
}

// selectInstances applies the filter and the service's protect threshold. The second
// result reports whether the threshold is reached among the enabled instances of the
// selected clusters (model.ProtectThresholdReached), whatever the health filter. Without
// a health filter every instance of the selected clusters is returned, disabled ones
// included. healthy=true returns the enabled healthy ones, or every enabled one when the
// threshold is reached. healthy=false returns the unhealthy ones. Instances keep their
// true healthy field.
func selectInstances(all []model.Instance, threshold float64, f instanceFilter) ([]model.Instance, bool) {
	var selected, enabled, healthy []model.Instance
	for _, in := range all {
		if f.clusters != nil && !f.clusters[in.Cluster] {
			continue
		}
		selected = append(selected, in)
		if in.Enabled {
			enabled = append(enabled, in)
			if in.Healthy {
				healthy = append(healthy, in)
			}
		}
	}
	reached := model.ProtectThresholdReached(len(healthy), len(enabled), threshold)
	switch {
	case f.healthy == nil:
		return selected, reached
	case !*f.healthy:
		var out []model.Instance
		for _, in := range selected {
			if !in.Healthy {
				out = append(out, in)
			}
		}
		return out, reached
	case reached:
		return enabled, true
	default:
		return healthy, false
	}
}

// listInstances serves GET .../services/{service}/instances?healthy=&cluster=.
func (s *server) listInstances(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	f, err := parseInstanceFilter(r)
	if err != nil {
		return err
	}
	if wantsStream(r) {
		return s.serveStream(w, r, instancesStream(key, f))
	}
	// The body is encoded once per change of the service and filter, and kept with the
	// cached view: a hit writes bytes.
	_, body, err := readValueIn(s, w, r, key.Namespace, func(ws *store.WatchSet) (uint64, []byte, error) {
		return s.store.EncodedServiceView(ws, key, f.key(), func(idx uint64, view store.ServiceView) ([]byte, error) {
			return encodeJSON(instancesResponse(idx, view, f))
		})
	})
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, body)
	return nil
}

// instancesResponse is the instance list of view that f selects.
func instancesResponse(idx uint64, view store.ServiceView, f instanceFilter) api.InstancesResponse {
	list, reached := selectInstances(view.Instances, view.Service.ProtectThreshold, f)
	return api.InstancesResponse{
		Service:                 wireService(view.Service),
		Index:                   idx,
		ProtectThresholdReached: reached,
		Instances:               wireList(list, wireInstance),
	}
}

// getInstance serves GET .../instances/{ip}:{port}.
func (s *server) getInstance(w http.ResponseWriter, r *http.Request) error {
	ref, err := instanceRefParam(r)
	if err != nil {
		return err
	}
	idx, in, err := readValueIn(s, w, r, ref.Namespace, func(ws *store.WatchSet) (uint64, model.Instance, error) {
		return s.store.Instance(ws, ref)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.InstanceResponse{
		Index:    idx,
		Instance: wireInstance(in),
	})
	return nil
}

// putInstance serves PUT .../instances/{ip}:{port}: register, or replace cluster,
// weight, enabled and metadata. healthy counts only at the first registration.
func (s *server) putInstance(w http.ResponseWriter, r *http.Request) error {
	ref, err := instanceRefParam(r)
	if err != nil {
		return err
	}
	var req api.InstanceRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	in := model.Instance{
		Namespace: ref.Namespace, Group: ref.Group, Service: ref.Service, IP: ref.IP, Port: ref.Port,
		Cluster: model.DefaultCluster, Weight: 1, Enabled: true, Healthy: true, Metadata: req.Metadata,
	}
	if req.Cluster != nil {
		in.Cluster = *req.Cluster
	}
	if req.Weight != nil {
		in.Weight = *req.Weight
	}
	if req.Enabled != nil {
		in.Enabled = *req.Enabled
	}
	if req.Healthy != nil {
		in.Healthy = *req.Healthy
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.RegisterInstance(r.Context(), in, cond))
}

// patchInstance serves PATCH .../instances/{ip}:{port}: only the fields present change
// (404 if the instance is missing). Health is not patchable (see .../health).
func (s *server) patchInstance(w http.ResponseWriter, r *http.Request) error {
	ref, err := instanceRefParam(r)
	if err != nil {
		return err
	}
	var req api.InstanceRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Healthy != nil {
		return invalid("healthy", "cannot be patched; use PUT .../instances/{ip}:{port}/health on a NONE cluster")
	}
	p := model.InstancePatch{Cluster: req.Cluster, Weight: req.Weight, Enabled: req.Enabled}
	if req.Metadata != nil {
		p.Metadata = &req.Metadata
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.UpdateInstance(r.Context(), ref, p, cond))
}

// deleteInstance serves DELETE .../instances/{ip}:{port} (404 if missing).
func (s *server) deleteInstance(w http.ResponseWriter, r *http.Request) error {
	ref, err := instanceRefParam(r)
	if err != nil {
		return err
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.DeregisterInstance(r.Context(), ref, cond))
}

// putHealth serves PUT .../instances/{ip}:{port}/health {"healthy":bool} (409 on a
// probed cluster, 404 if the instance is missing).
func (s *server) putHealth(w http.ResponseWriter, r *http.Request) error {
	ref, err := instanceRefParam(r)
	if err != nil {
		return err
	}
	var req api.HealthRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Healthy == nil {
		return invalid("healthy", "is required")
	}
	return written(w)(s.reg.SetInstanceHealth(r.Context(), ref, *req.Healthy))
}
