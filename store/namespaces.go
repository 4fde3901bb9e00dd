package store

import "github.com/rosterhq/roster/model"

// UpsertNamespace creates or replaces a namespace's name and description. An empty Name
// becomes the ID. It keeps the CreateIndex of an existing namespace; the indexes given
// in ns are ignored.
func (tx *Txn) UpsertNamespace(idx uint64, ns model.Namespace) error {
	if ns.Name == "" {
		ns.Name = ns.ID
	}
	if err := model.ValidateNamespaceRecord(ns); err != nil {
		return err
	}
	key := []byte(ns.ID)
	var old model.Namespace
	exists, err := tx.get(tx.namespaces, key, &old)
	if err != nil {
		return err
	}
	ns.CreateIndex, ns.ModifyIndex = idx, idx
	if exists {
		ns.CreateIndex, ns.ModifyIndex = old.CreateIndex, old.ModifyIndex
		if same, err := tx.sameAsStored(tx.namespaces, key, ns); err != nil || same {
			return err
		}
		ns.ModifyIndex = idx
	}
	if err := tx.putValue(tx.namespaces, key, ns); err != nil {
		return err
	}
	if !exists {
		if err := tx.bumpIndex(servicesIndexKey(ns.ID), idx); err != nil {
			return err
		}
		tx.touch(watchServiceList(ns.ID))
	}
	tx.touch(watchNamespaces)
	tx.emit(Event{Kind: EventNamespaceUpsert, Service: model.ServiceKey{Namespace: ns.ID}})
	return tx.bumpIndex(indexNamespaces, idx)
}

// ensureNamespace creates the namespace id (name = id) if it does not exist. It is a
// write-phase helper: callers have validated id.
func (tx *Txn) ensureNamespace(idx uint64, id string) error {
	if tx.namespaces.Get([]byte(id)) != nil {
		return nil
	}
	ns := model.Namespace{ID: id, Name: id, CreateIndex: idx, ModifyIndex: idx}
	if err := tx.putValue(tx.namespaces, []byte(id), ns); err != nil {
		return err
	}
	tx.touch(watchNamespaces, watchServiceList(id))
	tx.emit(Event{Kind: EventNamespaceUpsert, Service: model.ServiceKey{Namespace: id}})
	if err := tx.bumpIndex(servicesIndexKey(id), idx); err != nil {
		return err
	}
	return tx.bumpIndex(indexNamespaces, idx)
}

// DeleteNamespace removes a namespace. It fails with model.ErrNotFound if it does not exist
// and with model.ErrConflict for "public" or while the namespace has services.
func (tx *Txn) DeleteNamespace(idx uint64, id string) error {
	if err := model.ValidateNamespace(id); err != nil {
		return err
	}
	if id == model.DefaultNamespace {
		return conflict("namespace %q cannot be deleted", id)
	}
	key := []byte(id)
	if tx.namespaces.Get(key) == nil {
		return notFound("namespace %q", id)
	}
	if hasPrefix(tx.services, namespacePrefix(id, "")) {
		return conflict("namespace %q still has services", id)
	}
	if err := tx.del(tx.namespaces, key); err != nil {
		return err
	}
	if err := tx.del(tx.indexes, []byte(servicesIndexKey(id))); err != nil {
		return err
	}
	tx.touch(watchNamespaces, watchServiceList(id))
	tx.emit(Event{Kind: EventNamespaceDelete, Service: model.ServiceKey{Namespace: id}})
	return tx.bumpIndex(indexNamespaces, idx)
}

// UpsertNamespace runs Txn.UpsertNamespace in its own transaction.
func (s *Store) UpsertNamespace(idx uint64, ns model.Namespace) error {
	return s.Update(func(tx *Txn) error { return tx.UpsertNamespace(idx, ns) })
}

// DeleteNamespace runs Txn.DeleteNamespace in its own transaction.
func (s *Store) DeleteNamespace(idx uint64, id string) error {
	return s.Update(func(tx *Txn) error { return tx.DeleteNamespace(idx, id) })
}

// Namespaces returns every namespace sorted by ID, and the namespace-list index.
func (s *Store) Namespaces(ws *WatchSet) (uint64, []model.Namespace, error) {
	var (
		idx uint64
		out []model.Namespace
	)
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchNamespaces)
		i, err := r.index(indexNamespaces)
		if err != nil {
			return err
		}
		idx = r.result(i)
		return r.namespaces.ForEach(func(_, v []byte) error {
			var ns model.Namespace
			if err := r.s.codec.decode(v, &ns); err != nil {
				return err
			}
			out = append(out, ns)
			return nil
		})
	})
	if err != nil {
		return 0, nil, err
	}
	return idx, out, nil
}

// Namespace returns one namespace and its ModifyIndex; model.ErrNotFound (with the
// namespace-list index) if it does not exist.
func (s *Store) Namespace(ws *WatchSet, id string) (uint64, model.Namespace, error) {
	var (
		idx uint64
		ns  model.Namespace
	)
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchNamespaces)
		ok := false
		if !badKeyPart(id) {
			var err error
			if ok, err = r.get(r.namespaces, []byte(id), &ns); err != nil {
				return err
			}
		}
		if !ok {
			i, err := r.index(indexNamespaces)
			if err != nil {
				return err
			}
			idx = r.result(i)
			return notFound("namespace %q", id)
		}
		idx = r.result(ns.ModifyIndex)
		return nil
	})
	if err != nil {
		return idx, model.Namespace{}, err
	}
	return idx, ns, nil
}

// namespaceExists reports whether the namespace exists in a read.
func (r *reader) namespaceExists(id string) bool {
	return !badKeyPart(id) && r.namespaces.Get([]byte(id)) != nil
}
