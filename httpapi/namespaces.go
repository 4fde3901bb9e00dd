package httpapi

import (
	"fmt"
	"net/http"

	"github.com/rosterhq/roster/acl"
	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// listNamespaces serves GET /v1/namespaces.
func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	idx, list, err := readValue(s, w, r, func(ws *store.WatchSet) (uint64, []model.Namespace, error) {
		return s.store.Namespaces(ws)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NamespacesResponse{Index: idx, Namespaces: wireList(readable(r, list), wireNamespace)})
	return nil
}

// readable keeps the namespaces the request's token may read.
func readable(r *http.Request, list []model.Namespace) []model.Namespace {
	a := acl.FromContext(r.Context())
	out := list[:0:0]
	for _, ns := range list {
		if a.CanRead(ns.ID) {
			out = append(out, ns)
		}
	}
	return out
}

// getNamespace serves GET /v1/namespaces/{ns}.
func (s *server) getNamespace(w http.ResponseWriter, r *http.Request) error {
	id, err := namespaceParam(r)
	if err != nil {
		return err
	}
	idx, ns, err := readValueIn(s, w, r, id, func(ws *store.WatchSet) (uint64, model.Namespace, error) {
		return s.store.Namespace(ws, id)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.NamespaceResponse{Index: idx, Namespace: wireNamespace(ns)})
	return nil
}

// putNamespace serves PUT /v1/namespaces/{ns}: create, or replace name and description.
func (s *server) putNamespace(w http.ResponseWriter, r *http.Request) error {
	id, err := namespaceParam(r)
	if err != nil {
		return err
	}
	var req api.NamespaceRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ns := model.Namespace{ID: id, Name: req.Name, Description: req.Description}
	if ns.Name == "" {
		ns.Name = id
	}
	if err := model.AdmitNamespaceRecord(ns); err != nil {
		return err
	}
	return written(w)(s.reg.UpsertNamespace(r.Context(), ns))
}

// deleteNamespace serves DELETE /v1/namespaces/{ns} (409 for "public" or while it has services).
func (s *server) deleteNamespace(w http.ResponseWriter, r *http.Request) error {
	id, err := namespaceParam(r)
	if err != nil {
		return err
	}
	if id == model.DefaultNamespace {
		return fmt.Errorf("namespace %q always exists and cannot be deleted: %w", id, model.ErrConflict)
	}
	return written(w)(s.reg.DeleteNamespace(r.Context(), id))
}
