package store

import "github.com/rosterhq/roster/model"

// SetHealth applies the prober's health transitions and returns how many it applied.
// An update is skipped, not failed, when its ref is malformed, the instance is gone, the
// instance's CreateIndex differs from the update's Epoch (it was deregistered and
// registered again since it was probed), its cluster is not probed (check type NONE:
// health comes from the API there), or it already has that health. Updates are applied
// in order, so a later update of the same instance wins.
func (tx *Txn) SetHealth(idx uint64, ups []model.HealthUpdate) (int, error) {
	applied := 0
	for _, u := range ups {
		if model.ValidateInstanceRef(u.Ref) != nil {
			continue
		}
		key := instanceKey(u.Ref)
		var in model.Instance
		ok, err := tx.get(tx.instances, key, &in)
		if err != nil {
			return applied, err
		}
		if !ok || in.CreateIndex != u.Epoch || in.Healthy == u.Healthy {
			continue
		}
		c, _, err := tx.loadCluster(idx, in.ServiceKey(), in.Cluster)
		if err != nil {
			return applied, err
		}
		if c.HealthCheck.Type == model.CheckNone {
			continue
		}
		in.Healthy = u.Healthy
		if err := tx.writeInstance(idx, key, in); err != nil {
			return applied, err
		}
		applied++
	}
	return applied, nil
}

// SetHealthManual sets an instance's health by API. It fails with model.ErrNotFound if there
// is no such instance and with model.ErrConflict unless the instance's cluster has check type
// NONE (probed clusters own their instances' health). Setting the health it already has
// changes nothing.
func (tx *Txn) SetHealthManual(idx uint64, ref model.InstanceRef, healthy bool) error {
	in, key, err := tx.loadInstance(ref)
	if err != nil {
		return err
	}
	c, _, err := tx.loadCluster(idx, in.ServiceKey(), in.Cluster)
	if err != nil {
		return err
	}
	if c.HealthCheck.Type != model.CheckNone {
		return conflict("cluster %q of service %s is probed (%s); its health cannot be set by API",
			in.Cluster, in.ServiceKey(), c.HealthCheck.Type)
	}
	if in.Healthy == healthy {
		return nil
	}
	in.Healthy = healthy
	return tx.writeInstance(idx, key, in)
}

// SetHealth runs Txn.SetHealth in its own transaction.
func (s *Store) SetHealth(idx uint64, ups []model.HealthUpdate) (int, error) {
	var n int
	err := s.Update(func(tx *Txn) error {
		var err error
		n, err = tx.SetHealth(idx, ups)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SetHealthManual runs Txn.SetHealthManual in its own transaction.
func (s *Store) SetHealthManual(idx uint64, ref model.InstanceRef, healthy bool) error {
	return s.Update(func(tx *Txn) error { return tx.SetHealthManual(idx, ref, healthy) })
}
