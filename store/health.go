package store

import "github.com/rosterhq/roster/model"

// SetHealth applies the prober's health transitions and returns how many it applied.
// An update is skipped, not failed, when its ref is malformed, the instance is gone, the
// instance's CreateIndex differs from the update's Epoch (it was deregistered and
// registered again since it was probed), its cluster is not probed (check type NONE:
// health comes from the API there), or it already has that health. Updates are applied
// in order, so a later update of the same instance wins.
func (tx *Txn) SetHealth(idx uint64, ups []model.HealthUpdate) (int, error) {
	return tx.SetHealthAt(idx, ups, 0)
}

// SetHealthAt is SetHealth with the time the leader submitted the updates, in Unix
// milliseconds (0: unknown). An instance made unhealthy records at as its
// UnhealthySince; one made healthy clears it. An update that says unhealthy for an
// instance that is unhealthy with no UnhealthySince records at and counts as applied.
func (tx *Txn) SetHealthAt(idx uint64, ups []model.HealthUpdate, at int64) (int, error) {
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
		if !ok || in.CreateIndex != u.Epoch || (in.Healthy == u.Healthy && !stampsUnhealthy(in, u.Healthy, at)) {
			continue
		}
		c, _, err := tx.loadCluster(idx, in.ServiceKey(), in.Cluster)
		if err != nil {
			return applied, err
		}
		if c.HealthCheck.Type == model.CheckNone {
			continue
		}
		setHealth(&in, u.Healthy, at)
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
	return tx.SetHealthManualAt(idx, ref, healthy, 0)
}

// SetHealthManualAt is SetHealthManual with the time the leader submitted it, in Unix
// milliseconds (0: unknown), recorded as SetHealthAt records it.
func (tx *Txn) SetHealthManualAt(idx uint64, ref model.InstanceRef, healthy bool, at int64) error {
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
	if in.Healthy == healthy && !stampsUnhealthy(in, healthy, at) {
		return nil
	}
	setHealth(&in, healthy, at)
	return tx.writeInstance(idx, key, in)
}

// stampsUnhealthy reports whether setting an unhealthy instance unhealthy again at at
// records the time it lacks.
func stampsUnhealthy(in model.Instance, healthy bool, at int64) bool {
	return !healthy && !in.Healthy && in.UnhealthySince == 0 && at > 0
}

// setHealth sets an instance's health and its UnhealthySince: at when it becomes
// unhealthy (or lacks a time), cleared when it becomes healthy.
func setHealth(in *model.Instance, healthy bool, at int64) {
	switch {
	case healthy:
		in.UnhealthySince = 0
	case in.Healthy || in.UnhealthySince == 0:
		in.UnhealthySince = max(at, 0)
	}
	in.Healthy = healthy
}

// AutoDeregistration names an instance the leader deregisters because it stayed
// unhealthy for its cluster's DeregisterAfter: the registration epoch and the
// UnhealthySince the leader saw.
type AutoDeregistration struct {
	Ref            model.InstanceRef `json:"ref"`
	Epoch          uint64            `json:"epoch"`
	UnhealthySince int64             `json:"unhealthySince"`
}

// ReasonAutoDeregistered is the Reason of the delete event of an instance deregistered
// because it stayed unhealthy for its cluster's DeregisterAfter.
const ReasonAutoDeregistered = "auto-deregistered"

// AutoDeregister removes an instance that is still the one the leader decided to
// deregister: same epoch, unhealthy since the same time. It fails with
// model.ErrNotFound if the instance is gone and model.ErrConflict if it was registered
// again, became healthy (or unhealthy again later) meanwhile, or its UnhealthySince is
// unknown; either way nothing changes. Its delete event has Reason
// ReasonAutoDeregistered.
func (tx *Txn) AutoDeregister(idx uint64, d AutoDeregistration) error {
	in, _, err := tx.loadInstance(d.Ref)
	if err != nil {
		return err
	}
	switch {
	case in.CreateIndex != d.Epoch:
		return conflict("instance %s of service %s was registered again (epoch %d, expected %d)",
			in.Addr(), in.ServiceKey(), in.CreateIndex, d.Epoch)
	case in.Healthy || in.UnhealthySince == 0 || in.UnhealthySince != d.UnhealthySince:
		return conflict("instance %s of service %s is no longer unhealthy since %d", in.Addr(), in.ServiceKey(), d.UnhealthySince)
	}
	return tx.deregister(idx, d.Ref, ReasonAutoDeregistered)
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

// SetHealthAt runs Txn.SetHealthAt in its own transaction.
func (s *Store) SetHealthAt(idx uint64, ups []model.HealthUpdate, at int64) (int, error) {
	var n int
	err := s.Update(func(tx *Txn) error {
		var err error
		n, err = tx.SetHealthAt(idx, ups, at)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SetHealthManualAt runs Txn.SetHealthManualAt in its own transaction.
func (s *Store) SetHealthManualAt(idx uint64, ref model.InstanceRef, healthy bool, at int64) error {
	return s.Update(func(tx *Txn) error { return tx.SetHealthManualAt(idx, ref, healthy, at) })
}

// AutoDeregister runs Txn.AutoDeregister in its own transaction.
func (s *Store) AutoDeregister(idx uint64, d AutoDeregistration) error {
	return s.Update(func(tx *Txn) error { return tx.AutoDeregister(idx, d) })
}

// SetHealthManual runs Txn.SetHealthManual in its own transaction.
func (s *Store) SetHealthManual(idx uint64, ref model.InstanceRef, healthy bool) error {
	return s.Update(func(tx *Txn) error { return tx.SetHealthManual(idx, ref, healthy) })
}
