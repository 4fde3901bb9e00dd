package httpapi

import (
	"net/http"
	"unicode/utf8"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// listServices serves GET /v1/namespaces/{ns}/services?group=&name=&page=&size=: a page
// of services with the counts of their instances.
func (s *server) listServices(w http.ResponseWriter, r *http.Request) error {
	ns, err := namespaceParam(r)
	if err != nil {
		return err
	}
	f := store.ServiceFilter{Group: r.URL.Query().Get("group"), Name: r.URL.Query().Get("name")}
	if f.Group != "" {
		if err := model.ValidateGroup(f.Group); err != nil {
			return err
		}
	}
	if len(f.Name) > model.MaxServiceNameLen || !utf8.ValidString(f.Name) {
		return invalid("name", "must be valid UTF-8 of at most %d bytes", model.MaxServiceNameLen)
	}
	page, size, err := pageParams(r)
	if err != nil {
		return err
	}
	if wantsStream(r) {
		return s.serveStream(w, r, servicesStream(ns, f, page, size))
	}
	var (
		list  []store.ServiceSummary
		total int
	)
	idx, err := s.readIn(w, r, ns, func(ws *store.WatchSet) (uint64, error) {
		idx, l, n, err := s.store.ServiceSummaries(ws, ns, f, page, size)
		list, total = l, n
		return idx, err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ServicesResponse{
		Index: idx, Namespace: ns, Page: page, Size: size, Total: total, Services: wireList(list, wireServiceSummary),
	})
	return nil
}

// getService serves GET .../services/{service}: the service, its clusters and instance counts.
func (s *server) getService(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	idx, view, err := readValueIn(s, w, r, key.Namespace, func(ws *store.WatchSet) (uint64, store.ServiceView, error) {
		return s.store.ServiceView(ws, key)
	})
	if err != nil {
		return err
	}
	resp := api.ServiceResponse{
		Index:         idx,
		Service:       wireService(view.Service),
		Clusters:      wireList(view.Clusters, wireCluster),
		InstanceCount: len(view.Instances),
	}
	for _, in := range view.Instances {
		if in.Healthy {
			resp.HealthyCount++
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// putService serves PUT .../services/{service}: create, or replace the definition
// (protectThreshold, metadata); clusters and instances are kept.
func (s *server) putService(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	var req api.ServiceRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	svc := model.Service{Namespace: key.Namespace, Group: key.Group, Name: key.Service, Metadata: req.Metadata}
	if req.ProtectThreshold != nil {
		svc.ProtectThreshold = *req.ProtectThreshold
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.UpsertService(r.Context(), svc, cond))
}

// deleteService serves DELETE .../services/{service} (409 while it has instances).
func (s *server) deleteService(w http.ResponseWriter, r *http.Request) error {
	key, err := serviceKeyParam(r)
	if err != nil {
		return err
	}
	cond, err := casParam(r)
	if err != nil {
		return err
	}
	return written(w)(s.reg.DeleteService(r.Context(), key, cond))
}
