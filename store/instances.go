package store

import (
	"bytes"

	"github.com/rosterhq/roster/model"
)

// RegisterInstance creates or replaces an instance, creating its namespace, service and
// cluster if needed (a new cluster gets DefaultHealthCheck()). A new instance takes
// in.Healthy and CreateIndex idx. A replaced instance keeps its CreateIndex (its
// registration epoch) and its stored health, which only SetHealth and SetHealthManual
// change. The indexes given in in are ignored.
func (tx *Txn) RegisterInstance(idx uint64, in model.Instance) error {
	in.Metadata = normalizeMap(in.Metadata)
	if err := hardLimits.ValidateInstance(in); err != nil {
		return err
	}
	key := instanceKey(in.Ref())
	var old model.Instance
	exists, err := tx.get(tx.instances, key, &old)
	if err != nil {
		return err
	}
	in.CreateIndex, in.ModifyIndex, in.UnhealthySince = idx, idx, 0
	if exists {
		in.CreateIndex, in.ModifyIndex, in.Healthy = old.CreateIndex, old.ModifyIndex, old.Healthy
		in.UnhealthySince = old.UnhealthySince
		if same, err := tx.sameAsStored(tx.instances, key, in); err != nil || same {
			return err
		}
		in.ModifyIndex = idx
	}
	return tx.writeInstance(idx, key, in)
}

// writeInstance stores in (whose checks passed) with ModifyIndex idx, creating its
// cluster if needed and updating its service.
func (tx *Txn) writeInstance(idx uint64, key []byte, in model.Instance) error {
	skey := in.ServiceKey()
	svc, svcExists, err := tx.loadService(idx, skey)
	if err != nil {
		return err
	}
	if err := tx.writeService(idx, svc, svcExists); err != nil {
		return err
	}
	if err := tx.ensureCluster(idx, skey, in.Cluster); err != nil {
		return err
	}
	in.ModifyIndex = idx
	if err := tx.putValue(tx.instances, key, in); err != nil {
		return err
	}
	tx.emit(Event{Kind: EventInstanceUpsert, Instance: in, Ref: in.Ref(), Service: skey})
	return nil
}

// loadInstance validates ref and returns the stored instance; model.ErrInvalid for a malformed
// ref, model.ErrNotFound if there is no such instance.
func (tx *Txn) loadInstance(ref model.InstanceRef) (model.Instance, []byte, error) {
	if err := model.ValidateInstanceRef(ref); err != nil {
		return model.Instance{}, nil, err
	}
	key := instanceKey(ref)
	var in model.Instance
	ok, err := tx.get(tx.instances, key, &in)
	if err != nil {
		return model.Instance{}, nil, err
	}
	if !ok {
		return model.Instance{}, nil, notFound("instance %s of service %s", model.JoinAddr(ref.IP, ref.Port), ref.ServiceKey())
	}
	return in, key, nil
}

// UpdateInstance changes the patch's fields of an existing instance (model.ErrNotFound if
// there is none) and validates the result. Moving the instance to a cluster that does
// not exist creates that cluster with the default health check.
func (tx *Txn) UpdateInstance(idx uint64, ref model.InstanceRef, p model.InstancePatch) error {
	old, key, err := tx.loadInstance(ref)
	if err != nil {
		return err
	}
	in := p.ApplyTo(old)
	in.Metadata = normalizeMap(in.Metadata)
	if err := hardLimits.ValidateInstance(in); err != nil {
		return err
	}
	if same, err := tx.sameAsStored(tx.instances, key, in); err != nil || same {
		return err
	}
	return tx.writeInstance(idx, key, in)
}

// DeregisterInstance removes an instance; model.ErrNotFound if there is none. Its service and
// cluster stay.
func (tx *Txn) DeregisterInstance(idx uint64, ref model.InstanceRef) error {
	return tx.deregister(idx, ref, "")
}

// deregister removes an instance, its delete event carrying reason.
func (tx *Txn) deregister(idx uint64, ref model.InstanceRef, reason string) error {
	old, key, err := tx.loadInstance(ref)
	if err != nil {
		return err
	}
	skey := ref.ServiceKey()
	svc, svcExists, err := tx.loadService(idx, skey)
	if err != nil {
		return err
	}
	if err := tx.writeService(idx, svc, svcExists); err != nil {
		return err
	}
	if err := tx.del(tx.instances, key); err != nil {
		return err
	}
	tx.emit(Event{Kind: EventInstanceDelete, Instance: old, Ref: old.Ref(), Service: skey, Reason: reason})
	return nil
}

// RegisterInstance runs Txn.RegisterInstance in its own transaction.
func (s *Store) RegisterInstance(idx uint64, in model.Instance) error {
	return s.Update(func(tx *Txn) error { return tx.RegisterInstance(idx, in) })
}

// UpdateInstance runs Txn.UpdateInstance in its own transaction.
func (s *Store) UpdateInstance(idx uint64, ref model.InstanceRef, p model.InstancePatch) error {
	return s.Update(func(tx *Txn) error { return tx.UpdateInstance(idx, ref, p) })
}

// DeregisterInstance runs Txn.DeregisterInstance in its own transaction.
func (s *Store) DeregisterInstance(idx uint64, ref model.InstanceRef) error {
	return s.Update(func(tx *Txn) error { return tx.DeregisterInstance(idx, ref) })
}

// instanceList reads the instances of a service sorted by (IP, port), IPs compared as strings.
func (r *reader) instanceList(key model.ServiceKey) ([]model.Instance, error) {
	var out []model.Instance
	d := instanceDecoder{codec: r.s.codec}
	prefix := servicePrefix(key)
	c := r.instances.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if out == nil {
			out = make([]model.Instance, 0, 16)
		}
		out = append(out, model.Instance{})
		if err := d.decode(v, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Instances returns a service's instances sorted by (IP, port) — IPs compared as
// strings — with the service's ModifyIndex. model.ErrNotFound if the service does not exist.
func (s *Store) Instances(ws *WatchSet, key model.ServiceKey) (uint64, []model.Instance, error) {
	var (
		idx uint64
		out []model.Instance
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		if idx, _, err = r.service(key); err != nil {
			return err
		}
		out, err = r.instanceList(key)
		return err
	})
	if err != nil {
		return idx, nil, err
	}
	return idx, out, nil
}

// Instance returns one instance with its service's ModifyIndex. model.ErrNotFound if the
// service or the instance does not exist.
func (s *Store) Instance(ws *WatchSet, ref model.InstanceRef) (uint64, model.Instance, error) {
	var (
		idx uint64
		in  model.Instance
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		if idx, _, err = r.service(ref.ServiceKey()); err != nil {
			return err
		}
		ok := false
		if !badKeyPart(ref.IP) && ref.Port > 0 && ref.Port <= 65535 {
			if ok, err = r.get(r.instances, instanceKey(ref), &in); err != nil {
				return err
			}
		}
		if !ok {
			return notFound("instance %s of service %s", model.JoinAddr(ref.IP, ref.Port), ref.ServiceKey())
		}
		return nil
	})
	if err != nil {
		return idx, model.Instance{}, err
	}
	return idx, in, nil
}

// ServiceView is a service with its clusters and instances, read at one point in time.
// Store.ServiceView returns views shared through the read cache: their slices and maps
// are read-only (copy before changing anything).
type ServiceView struct {
	Service   model.Service
	Clusters  []model.Cluster
	Instances []model.Instance
}
