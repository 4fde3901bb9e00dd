package store

import (
	"bytes"
	"strings"

	"github.com/rosterhq/roster/model"
)

// UpsertService creates or replaces a service's definition (protect threshold and
// metadata), creating its namespace if needed. It never touches the service's clusters
// or instances, and keeps the CreateIndex of an existing service; the indexes given in
// svc are ignored.
func (tx *Txn) UpsertService(idx uint64, svc model.Service) error {
	svc.Metadata = normalizeMap(svc.Metadata)
	if err := hardLimits.ValidateService(svc); err != nil {
		return err
	}
	key := svc.Key()
	old, exists, err := tx.loadService(idx, key)
	if err != nil {
		return err
	}
	svc.CreateIndex, svc.ModifyIndex = old.CreateIndex, old.ModifyIndex
	if exists {
		if same, err := tx.sameAsStored(tx.services, serviceKey(key), svc); err != nil || same {
			return err
		}
	}
	return tx.writeService(idx, svc, exists)
}

// loadService returns the stored service, or a new empty one (CreateIndex idx) with
// exists false. It writes nothing.
func (tx *Txn) loadService(idx uint64, key model.ServiceKey) (model.Service, bool, error) {
	var svc model.Service
	ok, err := tx.get(tx.services, serviceKey(key), &svc)
	if err != nil {
		return model.Service{}, false, err
	}
	if !ok {
		return model.Service{Namespace: key.Namespace, Group: key.Group, Name: key.Service, CreateIndex: idx, ModifyIndex: idx}, false, nil
	}
	return svc, true, nil
}

// writeService stores svc with ModifyIndex idx (creating its namespace when the service
// is new), bumps the namespace's services-list index and marks both watched items.
// Every change to a service, its clusters or its instances goes through here.
func (tx *Txn) writeService(idx uint64, svc model.Service, exists bool) error {
	key := svc.Key()
	if !exists {
		if err := tx.ensureNamespace(idx, key.Namespace); err != nil {
			return err
		}
	}
	svc.ModifyIndex = idx
	if err := tx.putValue(tx.services, serviceKey(key), svc); err != nil {
		return err
	}
	tx.touch(watchService(key), watchServiceList(key.Namespace))
	tx.emit(Event{Kind: EventServiceUpsert, Service: key})
	return tx.bumpIndex(servicesIndexKey(key.Namespace), idx)
}

// DeleteService removes a service and its clusters. It fails with model.ErrNotFound if the
// service does not exist and with model.ErrConflict while it has instances.
func (tx *Txn) DeleteService(idx uint64, key model.ServiceKey) error {
	if err := model.ValidateServiceKey(key); err != nil {
		return err
	}
	sk := serviceKey(key)
	if tx.services.Get(sk) == nil {
		return notFound("service %s", key)
	}
	prefix := servicePrefix(key)
	if hasPrefix(tx.instances, prefix) {
		return conflict("service %s still has instances", key)
	}
	for _, k := range keysWithPrefix(tx.clusters, prefix) {
		if err := tx.del(tx.clusters, k); err != nil {
			return err
		}
	}
	if err := tx.del(tx.services, sk); err != nil {
		return err
	}
	tx.touch(watchService(key), watchServiceList(key.Namespace))
	tx.emit(Event{Kind: EventServiceDelete, Service: key})
	return tx.bumpIndex(servicesIndexKey(key.Namespace), idx)
}

// UpsertService runs Txn.UpsertService in its own transaction.
func (s *Store) UpsertService(idx uint64, svc model.Service) error {
	return s.Update(func(tx *Txn) error { return tx.UpsertService(idx, svc) })
}

// DeleteService runs Txn.DeleteService in its own transaction.
func (s *Store) DeleteService(idx uint64, key model.ServiceKey) error {
	return s.Update(func(tx *Txn) error { return tx.DeleteService(idx, key) })
}

// Services lists a namespace's services sorted by (group, name), optionally only those
// of one group (group ""= all), one page at a time: page counts from 1, size 0 returns
// all. It also returns the number of matching services and the namespace's
// services-list index, which rises with every change to any of its services, their
// clusters or instances. model.ErrNotFound if the namespace does not exist; model.ErrInvalid for a
// page below 1 or a negative size.
func (s *Store) Services(ws *WatchSet, ns, group string, page, size int) (uint64, []model.Service, int, error) {
	var out []model.Service
	idx, total, err := s.services(ws, ServiceFilter{Group: group}, ns, page, size, func(_ *reader, svc model.Service) error {
		out = append(out, svc)
		return nil
	})
	if err != nil {
		return idx, nil, 0, err
	}
	return idx, out, total, nil
}

// ServiceFilter selects services in a list: only one group ("" all), only names that
// contain Name, compared case-insensitively ("" all).
type ServiceFilter struct {
	Group string
	Name  string
}

// ServiceSummary is a service with counts of its instances, as a service list shows it.
type ServiceSummary struct {
	Service model.Service
	// Instances and Healthy count all its instances and the healthy ones; Enabled and
	// EnabledHealthy count the same among enabled instances, what a Nacos client is
	// given and what its protect threshold applies to.
	Instances, Healthy, Enabled, EnabledHealthy int
}

// ProtectThresholdReached reports whether the service's protect threshold is reached
// among its enabled instances (model.ProtectThresholdReached).
func (s ServiceSummary) ProtectThresholdReached() bool {
	return model.ProtectThresholdReached(s.EnabledHealthy, s.Enabled, s.Service.ProtectThreshold)
}

// ServiceSummaries is Services with a name filter and the instance counts of each
// service of the page, read in the same transaction. A filter on the name counts and
// pages only the matching services.
func (s *Store) ServiceSummaries(ws *WatchSet, ns string, f ServiceFilter, page, size int) (uint64, []ServiceSummary, int, error) {
	var out []ServiceSummary
	idx, total, err := s.services(ws, f, ns, page, size, func(r *reader, svc model.Service) error {
		list, err := r.instanceList(svc.Key())
		if err != nil {
			return err
		}
		sum := ServiceSummary{Service: svc, Instances: len(list)}
		for _, in := range list {
			if in.Healthy {
				sum.Healthy++
			}
			if in.Enabled {
				sum.Enabled++
				if in.Healthy {
					sum.EnabledHealthy++
				}
			}
		}
		out = append(out, sum)
		return nil
	})
	if err != nil {
		return idx, nil, 0, err
	}
	return idx, out, total, nil
}

// services walks a namespace's services that pass f, in (group, name) order, calling
// emit for those of the page, and returns the services-list index and how many passed.
func (s *Store) services(ws *WatchSet, f ServiceFilter, ns string, page, size int, emit func(*reader, model.Service) error) (uint64, int, error) {
	if page < 1 {
		return 0, 0, model.Invalid("page", "must be at least 1")
	}
	if size < 0 {
		return 0, 0, model.Invalid("size", "must not be negative")
	}
	group, name := f.Group, strings.ToLower(f.Name)
	var (
		idx   uint64
		total int
	)
	err := s.view(ws, func(r *reader) error {
		if !r.namespaceExists(ns) {
			i, err := r.notFoundIndex(ns)
			idx = i
			if err != nil {
				return err
			}
			return notFound("namespace %q", ns)
		}
		r.addWatch(watchServiceList(ns))
		i, err := r.index(servicesIndexKey(ns))
		if err != nil {
			return err
		}
		idx = r.result(i)
		if group != "" && badKeyPart(group) {
			return nil // no group has that name
		}
		first := (page - 1) * size
		prefix := namespacePrefix(ns, group)
		c := r.services.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if name != "" && !strings.Contains(strings.ToLower(serviceNameOfKey(k)), name) {
				continue
			}
			if total >= first && (size == 0 || total < first+size) {
				var svc model.Service
				if err := r.s.codec.decode(v, &svc); err != nil {
					return err
				}
				if err := emit(r, svc); err != nil {
					return err
				}
			}
			total++
		}
		return nil
	})
	if err != nil {
		return idx, 0, err
	}
	return idx, total, nil
}

// Service returns one service and its ModifyIndex. If it does not exist the error wraps
// model.ErrNotFound and the index is the namespace's services-list index (or the
// namespace-list index when the namespace is missing too).
func (s *Store) Service(ws *WatchSet, key model.ServiceKey) (uint64, model.Service, error) {
	var (
		idx uint64
		svc model.Service
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		idx, svc, err = r.service(key)
		return err
	})
	return idx, svc, err
}
