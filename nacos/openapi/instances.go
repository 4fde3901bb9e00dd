package openapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// errNacosInstanceNotFound is the 404 (21003) of a write on an instance that does not exist.
func errNacosInstanceNotFound(ref model.InstanceRef) error {
	return nacos.Err(http.StatusNotFound, nacos.CodeInstanceNotFound, "instance %s not found in service %s (namespace %s)",
		model.JoinAddr(ref.IP, ref.Port), ref.ServiceKey().GroupedName(), ref.Namespace)
}

// register serves POST .../instance: register, or re-register (replace cluster,
// weight, enabled and metadata; health is kept), a persistent instance. The service and
// cluster are created implicitly. Registrations that are ephemeral, explicitly or by
// Nacos's default when ephemeral is absent, are refused (400) and nothing is written.
func (s *API) register(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	in, err := registration(p, s.reg.Limits())
	if err != nil {
		return nil, err
	}
	if err := wrote(w)(s.reg.RegisterInstance(r.Context(), in, registry.Condition{})); err != nil {
		return nil, err
	}
	return "ok", nil
}

// update serves PUT .../instance: it replaces the fields Nacos's update form
// carries, weight (default 1), enabled (default true) and metadata (default none), and
// moves the instance to clusterName when one is given. Health is not changed. An
// instance that does not exist is a 404 (21003): an update never registers (as Nacos
// 2.x persistent storage behaves), so a client cannot register an instance while
// skipping the ephemeral check of POST.
func (s *API) update(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	f, err := parseNacosInstanceForm(p, s.reg.Limits())
	if err != nil {
		return nil, err
	}
	if f.Ephemeral != nil && *f.Ephemeral {
		return nil, nacos.EphemeralRefused(f.Ref.ServiceKey(), "update")
	}
	weight, enabled, md := 1.0, true, map[string]string{}
	if f.Weight != nil {
		weight = *f.Weight
	}
	if f.Enabled != nil {
		enabled = *f.Enabled
	}
	if f.Metadata != nil {
		md = *f.Metadata
	}
	patch := model.InstancePatch{Cluster: f.Cluster, Weight: &weight, Enabled: &enabled, Metadata: &md}
	return s.patchInstance(w, r, f.Ref, patch)
}

// patch serves PATCH .../instance: only the given fields among weight, enabled,
// metadata and clusterName (legacy cluster) change. healthy is refused: health comes
// from the prober, or from PUT .../health/instance on a NONE cluster.
func (s *API) patch(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	f, err := parseNacosInstanceForm(p, s.reg.Limits())
	if err != nil {
		return nil, err
	}
	if f.Healthy != nil {
		return nil, nacos.Invalid("Param 'healthy' cannot be patched: the prober owns health; " +
			"on a cluster with health checker NONE use PUT /nacos/v1/ns/health/instance")
	}
	if f.Ephemeral != nil && *f.Ephemeral {
		return nil, nacos.EphemeralRefused(f.Ref.ServiceKey(), "update")
	}
	patch := model.InstancePatch{Cluster: f.Cluster, Weight: f.Weight, Enabled: f.Enabled, Metadata: f.Metadata}
	return s.patchInstance(w, r, f.Ref, patch)
}

// patchInstance applies patch to an existing instance (404 when it is missing). A
// patch that changes nothing writes nothing.
func (s *API) patchInstance(w http.ResponseWriter, r *http.Request, ref model.InstanceRef, patch model.InstancePatch) (any, error) {
	view, found, err := s.leaderView(r, ref.ServiceKey())
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errNacosInstanceNotFound(ref)
	}
	if _, ok := findInstance(view, ref); !ok {
		return nil, errNacosInstanceNotFound(ref)
	}
	if patch == (model.InstancePatch{}) {
		return "ok", nil
	}
	err = wrote(w)(s.reg.UpdateInstance(r.Context(), ref, patch, registry.Condition{}))
	if errors.Is(err, model.ErrNotFound) {
		return nil, errNacosInstanceNotFound(ref)
	}
	if err != nil {
		return nil, err
	}
	return "ok", nil
}

// deregister serves DELETE .../instance. The persistent instance at ip:port is
// removed whatever ephemeral says: Nacos silently keeps a persistent instance unless
// the caller sends ephemeral=false, its most reported bug. clusterName is checked but
// does not identify the instance (ip:port does). Deregistering an instance that is not
// there answers ok, as Nacos does, and writes nothing.
func (s *API) deregister(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	ref, err := instanceRef(p)
	if err != nil {
		return nil, err
	}
	if c := p.str("clusterName", "cluster"); c != "" {
		if err := model.ValidateClusterName(c); err != nil {
			return nil, err
		}
	}
	if _, _, err := p.boolean("ephemeral"); err != nil {
		return nil, err
	}
	view, found, err := s.leaderView(r, ref.ServiceKey())
	if err != nil {
		return nil, err
	}
	if _, ok := findInstance(view, ref); !found || !ok {
		return "ok", nil
	}
	err = wrote(w)(s.reg.DeregisterInstance(r.Context(), ref, registry.Condition{}))
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return nil, err
	}
	return "ok", nil
}

// instanceDetailV1 is the body of GET /nacos/v1/ns/instance.
type instanceDetailV1 struct {
	Metadata    map[string]string `json:"metadata"`
	InstanceID  string            `json:"instanceId"`
	Port        int               `json:"port"`
	Service     string            `json:"service"`
	Healthy     bool              `json:"healthy"`
	IP          string            `json:"ip"`
	ClusterName string            `json:"clusterName"`
	Weight      float64           `json:"weight"`
}

// instanceDetailV2 is the data of GET /nacos/v2/ns/instance.
type instanceDetailV2 struct {
	ServiceName string            `json:"serviceName"`
	IP          string            `json:"ip"`
	Port        int               `json:"port"`
	ClusterName string            `json:"clusterName"`
	Weight      float64           `json:"weight"`
	Healthy     bool              `json:"healthy"`
	InstanceID  string            `json:"instanceId"`
	Metadata    map[string]string `json:"metadata"`
}

// getInstance serves GET .../instance: one instance with its true health (404,
// 20004, when missing). The cluster parameters do not identify the instance.
func (s *API) getInstance(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	ref, err := instanceRef(p)
	if err != nil {
		return nil, err
	}
	var in model.Instance
	_, err = s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		idx, i, err := s.store.Instance(ws, ref)
		in = i
		return idx, err
	})
	if errors.Is(err, model.ErrNotFound) {
		return nil, nacos.Err(http.StatusNotFound, nacos.CodeResourceNotFound, "no matched ip found: instance %s of service %s (namespace %s)",
			model.JoinAddr(ref.IP, ref.Port), ref.ServiceKey().GroupedName(), ref.Namespace)
	}
	if err != nil {
		return nil, err
	}
	grouped := in.ServiceKey().GroupedName()
	if isV2(r) {
		return instanceDetailV2{
			ServiceName: grouped, IP: in.IP, Port: in.Port, ClusterName: in.Cluster, Weight: in.Weight,
			Healthy: in.Healthy, InstanceID: in.InstanceID(), Metadata: nacos.NonNilMap(in.Metadata),
		}, nil
	}
	return instanceDetailV1{
		Metadata: nacos.NonNilMap(in.Metadata), InstanceID: in.InstanceID(), Port: in.Port, Service: grouped,
		Healthy: in.Healthy, IP: in.IP, ClusterName: in.Cluster, Weight: in.Weight,
	}, nil
}

// listInstances serves GET .../instance/list: the enabled instances of the service
// (of the clusters given by v1's clusters or v2's clusterName), with Nacos's protect
// threshold behaviour (nacos.Select). An unknown service is an empty list, not an error.
// A v1 client recorded for pushes (pushRoute) is answered udppush.CacheMillis.
func (s *API) listInstances(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	key, err := serviceKey(p)
	if err != nil {
		return nil, err
	}
	param := "clusters"
	if isV2(r) {
		param = "clusterName"
	}
	clusters, err := p.clusterFilter(param)
	if err != nil {
		return nil, err
	}
	healthyOnly, _, err := p.boolean("healthyOnly")
	if err != nil {
		return nil, err
	}
	var (
		view  store.ServiceView
		found bool
	)
	_, err = s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		idx, v, err := s.store.ServiceView(ws, key)
		view, found = v, err == nil
		if errors.Is(err, model.ErrNotFound) {
			return idx, nil
		}
		return idx, err
	})
	if err != nil {
		return nil, err
	}
	return nacos.ServiceInfoFor(key, view, found, clusters, healthyOnly, listCacheMillis(r), time.Now()), nil
}

// setHealth serves PUT .../health/instance (and .../health): set an instance's
// health by hand, only on a cluster whose health checker is NONE (400, 21011, on a
// probed cluster, as Nacos answers). The instance's own cluster decides; clusterName
// is checked but not used. A missing instance is a 404 (21003).
func (s *API) setHealth(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	ref, err := instanceRef(p)
	if err != nil {
		return nil, err
	}
	healthy, ok, err := p.boolean("healthy")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nacos.Err(http.StatusBadRequest, nacos.CodeHealthyParamMiss,
			"Required parameter 'healthy' type Boolean is not present")
	}
	if c := p.str("clusterName", "cluster"); c != "" {
		if err := model.ValidateClusterName(c); err != nil {
			return nil, err
		}
	}
	view, found, err := s.leaderView(r, ref.ServiceKey())
	if err != nil {
		return nil, err
	}
	in, ok := findInstance(view, ref)
	if !found || !ok {
		return nil, errNacosInstanceNotFound(ref)
	}
	if c, ok := findCluster(view, in.Cluster); ok && c.HealthCheck.Type != model.CheckNone {
		return nil, errHealthCheckRunning(ref.ServiceKey(), in.Cluster, c.HealthCheck.Type)
	}
	if in.Healthy == healthy {
		return "ok", nil
	}
	err = wrote(w)(s.reg.SetInstanceHealth(r.Context(), ref, healthy))
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil, errNacosInstanceNotFound(ref)
	case errors.Is(err, model.ErrConflict):
		return nil, errHealthCheckRunning(ref.ServiceKey(), in.Cluster, "")
	case err != nil:
		return nil, err
	}
	return "ok", nil
}

// errHealthCheckRunning refuses a manual health change on a probed cluster.
func errHealthCheckRunning(key model.ServiceKey, cluster string, typ model.CheckType) error {
	detail := ""
	if typ != "" {
		detail = " (health checker " + string(typ) + ")"
	}
	return nacos.Err(http.StatusBadRequest, nacos.CodeHealthCheckRunning,
		"health check is still working, service: %s, cluster: %s%s; only a cluster with health checker NONE takes health by API",
		key.GroupedName(), cluster, detail)
}

// beat refuses client heartbeats: Roster keeps persistent instances only and its
// leader probes them, so there is nothing a beat could renew.
func (s *API) beat(http.ResponseWriter, *http.Request, params) (any, error) {
	return nil, nacos.Err(http.StatusBadRequest, nacos.CodeInstanceError,
		"Roster takes no heartbeats: it keeps persistent instances only and probes them itself. "+
			"Register with ephemeral=false and configure the cluster's health checker (PUT /nacos/v1/ns/cluster)")
}

// metadataBatch refuses the batch metadata endpoints.
func (s *API) metadataBatch(http.ResponseWriter, *http.Request, params) (any, error) {
	return nil, nacos.Err(http.StatusBadRequest, nacos.CodeInstanceError,
		"batch metadata updates are not supported by Roster: update each instance with PATCH /nacos/v1/ns/instance")
}
