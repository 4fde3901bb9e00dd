package openapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/nacos"
	"github.com/rosterhq/roster/registry"
	"github.com/rosterhq/roster/store"
)

// Paging of GET /nacos/v2/ns/service/list (Nacos's defaults and cap).
const (
	v2DefaultPageSize = 20
	v2MaxPageSize     = 500
)

// serviceForm reads a service definition: the service key, protectThreshold
// (default 0), metadata (JSON or k=v,k2=v2; default none) and selector (only none), and
// refuses ephemeral=true. Nacos's create and update both replace the definition with
// these values.
func serviceForm(p params, limits model.Limits) (model.Service, error) {
	key, err := serviceKey(p)
	if err != nil {
		return model.Service{}, err
	}
	svc := model.Service{Namespace: key.Namespace, Group: key.Group, Name: key.Service}
	if t, ok, err := p.float("protectThreshold"); err != nil {
		return svc, err
	} else if ok {
		svc.ProtectThreshold = t
	}
	if raw := p.str("metadata"); raw != "" {
		if svc.Metadata, err = metadata(raw, nacos.CodeServiceMetadata); err != nil {
			return svc, err
		}
	}
	if err := checkNoSelector(p.str("selector")); err != nil {
		return svc, err
	}
	if eph, _, err := p.boolean("ephemeral"); err != nil {
		return svc, err
	} else if eph {
		return svc, nacos.Invalid("Roster keeps persistent services only: ephemeral must be false")
	}
	if err := limits.AdmitService(svc); err != nil {
		return svc, err
	}
	return svc, nil
}

// checkNoSelector accepts an absent selector or one of type none; Roster has no
// selectors (21006 otherwise).
func checkNoSelector(raw string) error {
	if raw == "" {
		return nil
	}
	var sel struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(raw), &sel); err != nil {
		return nacos.Err(http.StatusBadRequest, nacos.CodeSelector, "Param 'selector' is not a JSON object: %v", err)
	}
	if t := strings.ToLower(strings.TrimSpace(sel.Type)); t != "" && t != "none" {
		return nacos.Err(http.StatusBadRequest, nacos.CodeSelector,
			"selector type %q is not supported: Roster has no selectors (use type none or leave selector out)", sel.Type)
	}
	return nil
}

// errNacosConcurrentChange answers a read-modify-write that kept losing to concurrent
// changes of the same service (409, resource conflict).
func errNacosConcurrentChange(key model.ServiceKey) error {
	return nacos.Err(http.StatusConflict, nacos.CodeResourceConflict, "service %s kept changing during the update; retry", key.GroupedName())
}

// errNacosServiceNotFound is Nacos's answer to a service that does not exist: 400, 21008.
func errNacosServiceNotFound(key model.ServiceKey) error {
	return nacos.Err(http.StatusBadRequest, nacos.CodeServiceNotExist, "service %s not found in namespace %s",
		key.GroupedName(), key.Namespace)
}

// createService serves POST .../service: create a service (400, 21007, when it
// already exists).
func (s *API) createService(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	svc, err := serviceForm(p, s.reg.Limits())
	if err != nil {
		return nil, err
	}
	exists := nacos.Err(http.StatusBadRequest, nacos.CodeServiceAlreadyExist,
		"specified service %s already exists!", svc.Key().GroupedName())
	// A service the leader already has is refused without a log entry; whether a create
	// racing another one wins is decided inside the state machine (created only if
	// absent), so of concurrent creates exactly one succeeds.
	if _, found, err := s.leaderView(r, svc.Key()); err != nil {
		return nil, err
	} else if found {
		return nil, exists
	}
	err = wrote(w)(s.reg.UpsertService(r.Context(), svc, registry.IfAbsent()))
	if errors.Is(err, model.ErrCASMismatch) {
		return nil, exists
	}
	if err != nil {
		return nil, err
	}
	return "ok", nil
}

// updateService serves PUT .../service: replace an existing service's protect
// threshold and metadata (parameters left out take their defaults, as in Nacos; 400,
// 21008, when the service does not exist).
func (s *API) updateService(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	svc, err := serviceForm(p, s.reg.Limits())
	if err != nil {
		return nil, err
	}
	// Replaced only while it exists: conditional on the index read, so a service deleted
	// in between is not brought back; a change in between is read again.
	for range maxCASRetries {
		view, found, err := s.leaderView(r, svc.Key())
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, errNacosServiceNotFound(svc.Key())
		}
		err = wrote(w)(s.reg.UpsertService(r.Context(), svc, registry.IfIndex(view.Service.ModifyIndex)))
		if errors.Is(err, model.ErrCASMismatch) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return "ok", nil
	}
	return nil, errNacosConcurrentChange(svc.Key())
}

// deleteService serves DELETE .../service: remove a service without instances
// (400, 21009, while it has some; 400, 21008, when it does not exist; as Nacos 2.x).
func (s *API) deleteService(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	key, err := serviceKey(p)
	if err != nil {
		return nil, err
	}
	view, found, err := s.leaderView(r, key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errNacosServiceNotFound(key)
	}
	notEmpty := nacos.Err(http.StatusBadRequest, nacos.CodeServiceDeleteFailure,
		"Service %s is not empty, can't be delete. Please unregister instance first", key.GroupedName())
	if len(view.Instances) > 0 {
		return nil, notEmpty
	}
	err = wrote(w)(s.reg.DeleteService(r.Context(), key, registry.Condition{}))
	switch {
	case errors.Is(err, model.ErrConflict):
		return nil, notEmpty
	case errors.Is(err, model.ErrNotFound):
		return nil, errNacosServiceNotFound(key)
	case err != nil:
		return nil, err
	}
	return "ok", nil
}

// selector is the selector Nacos shows for a service without one.
type selector struct {
	Type        string `json:"type"`
	ContextType string `json:"contextType,omitempty"`
}

// clusterV1 is one cluster of GET /nacos/v1/ns/service.
type clusterV1 struct {
	Name          string            `json:"name"`
	HealthChecker healthChecker     `json:"healthChecker"`
	Metadata      map[string]string `json:"metadata"`
}

// serviceV1 is the body of GET /nacos/v1/ns/service.
type serviceV1 struct {
	Metadata         map[string]string `json:"metadata"`
	GroupName        string            `json:"groupName"`
	NamespaceID      string            `json:"namespaceId"`
	Name             string            `json:"name"`
	Selector         selector          `json:"selector"`
	ProtectThreshold float64           `json:"protectThreshold"`
	Clusters         []clusterV1       `json:"clusters"`
}

// clusterV2 is one entry of clusterMap in GET /nacos/v2/ns/service.
type clusterV2 struct {
	ClusterName             string            `json:"clusterName"`
	HealthChecker           healthChecker     `json:"healthChecker"`
	Metadata                map[string]string `json:"metadata"`
	HealthyCheckPort        int               `json:"healthyCheckPort"`
	UseInstancePortForCheck bool              `json:"useInstancePortForCheck"`
}

// serviceV2 is the data of GET /nacos/v2/ns/service.
type serviceV2 struct {
	Namespace        string               `json:"namespace"`
	ServiceName      string               `json:"serviceName"`
	GroupName        string               `json:"groupName"`
	ClusterMap       map[string]clusterV2 `json:"clusterMap"`
	Metadata         map[string]string    `json:"metadata"`
	ProtectThreshold float64              `json:"protectThreshold"`
	Selector         selector             `json:"selector"`
	Ephemeral        bool                 `json:"ephemeral"`
}

// getService serves GET .../service: the service and its clusters with their
// health checkers (400, 21008, when it does not exist, as Nacos 2.x).
func (s *API) getService(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	key, err := serviceKey(p)
	if err != nil {
		return nil, err
	}
	var view store.ServiceView
	_, err = s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		idx, v, err := s.store.ServiceView(ws, key)
		view = v
		return idx, err
	})
	if errors.Is(err, model.ErrNotFound) {
		return nil, errNacosServiceNotFound(key)
	}
	if err != nil {
		return nil, err
	}
	svc := view.Service
	if isV2(r) {
		out := serviceV2{
			Namespace: svc.Namespace, ServiceName: svc.Name, GroupName: svc.Group,
			ClusterMap: map[string]clusterV2{}, Metadata: nacos.NonNilMap(svc.Metadata),
			ProtectThreshold: svc.ProtectThreshold, Selector: selector{Type: "none", ContextType: "NONE"},
		}
		for _, c := range view.Clusters {
			out.ClusterMap[c.Name] = clusterV2{
				ClusterName: c.Name, HealthChecker: toNacosHealthChecker(c.HealthCheck), Metadata: nacos.NonNilMap(c.Metadata),
				HealthyCheckPort: c.HealthCheck.Port, UseInstancePortForCheck: c.HealthCheck.Port == 0,
			}
		}
		return out, nil
	}
	out := serviceV1{
		Metadata: nacos.NonNilMap(svc.Metadata), GroupName: svc.Group, NamespaceID: svc.Namespace, Name: svc.Name,
		Selector: selector{Type: "none"}, ProtectThreshold: svc.ProtectThreshold, Clusters: []clusterV1{},
	}
	for _, c := range view.Clusters {
		out.Clusters = append(out.Clusters, clusterV1{
			Name: c.Name, HealthChecker: toNacosHealthChecker(c.HealthCheck), Metadata: nacos.NonNilMap(c.Metadata),
		})
	}
	return out, nil
}

// serviceListV1 is the body of GET /nacos/v1/ns/service/list.
type serviceListV1 struct {
	Count int      `json:"count"`
	Doms  []string `json:"doms"`
}

// serviceListV2 is the data of GET /nacos/v2/ns/service/list.
type serviceListV2 struct {
	Count    int      `json:"count"`
	Services []string `json:"services"`
}

// listServices serves GET .../service/list: the names (without group) of one
// group's services (groupName, default DEFAULT_GROUP), one page at a time, and how many
// there are. v1 requires pageNo and pageSize, as Nacos does; v2 defaults them to 1 and
// 20 and caps pageSize at 500. pageNo is at least 1 and pageSize at least 0
// (params.page); a page size of 0 is an empty page that still counts. An unknown
// namespace has no services.
func (s *API) listServices(w http.ResponseWriter, r *http.Request, p params) (any, error) {
	ns := p.str("namespaceId")
	if ns == "" {
		ns = model.DefaultNamespace
	}
	if err := model.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	group := p.str("groupName")
	if group == "" {
		group = model.DefaultGroup
	}
	if err := model.ValidateGroup(group); err != nil {
		return nil, err
	}
	if err := checkNoSelector(p.str("selector")); err != nil {
		return nil, err
	}
	v2 := isV2(r)
	if !v2 {
		for _, name := range []string{"pageNo", "pageSize"} {
			if _, err := p.required(name, "int"); err != nil {
				return nil, err
			}
		}
	}
	page, size, err := p.page(v2DefaultPageSize)
	if err != nil {
		return nil, err
	}
	if v2 {
		size = min(size, v2MaxPageSize)
	}
	var (
		list  []model.Service
		total int
	)
	_, err = s.read(w, r, func(ws *store.WatchSet) (uint64, error) {
		// A page size of 0 shows no names but still counts them.
		pg, sz := page, size
		if sz <= 0 {
			pg, sz = 1, 1
		}
		idx, l, n, err := s.store.Services(ws, ns, group, pg, sz)
		list, total = l, n
		if size <= 0 {
			list = nil
		}
		if errors.Is(err, model.ErrNotFound) {
			list, total = nil, 0
			return idx, nil
		}
		return idx, err
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, svc := range list {
		names = append(names, svc.Name)
	}
	if v2 {
		return serviceListV2{Count: total, Services: names}, nil
	}
	return serviceListV1{Count: total, Doms: names}, nil
}
