package store

import (
	"bytes"

	"github.com/rosterhq/roster/model"
)

// normalizeCluster fills health-check defaults and turns empty maps and slices into nil.
func normalizeCluster(c model.Cluster) model.Cluster {
	c.HealthCheck = c.HealthCheck.WithDefaults()
	c.HealthCheck.Headers = normalizeMap(c.HealthCheck.Headers)
	if len(c.HealthCheck.ExpectedStatus) == 0 {
		c.HealthCheck.ExpectedStatus = nil
	}
	c.Metadata = normalizeMap(c.Metadata)
	return c
}

// UpsertCluster creates or replaces a cluster's definition (health check and metadata),
// creating its namespace and service if needed. Zero health-check fields take the
// defaults (HealthCheck.WithDefaults). It keeps the CreateIndex of an existing cluster;
// the indexes given in c are ignored.
func (tx *Txn) UpsertCluster(idx uint64, c model.Cluster) error {
	c = normalizeCluster(c)
	if err := hardLimits.ValidateCluster(c); err != nil {
		return err
	}
	skey := model.ServiceKey{Namespace: c.Namespace, Group: c.Group, Service: c.Service}
	svc, svcExists, err := tx.loadService(idx, skey)
	if err != nil {
		return err
	}
	ck := clusterKey(skey, c.Name)
	var old model.Cluster
	exists, err := tx.get(tx.clusters, ck, &old)
	if err != nil {
		return err
	}
	c.CreateIndex, c.ModifyIndex = idx, idx
	if exists {
		c.CreateIndex, c.ModifyIndex = old.CreateIndex, old.ModifyIndex
		if same, err := tx.sameAsStored(tx.clusters, ck, c); err != nil || same {
			return err
		}
		c.ModifyIndex = idx
	}
	if err := tx.writeService(idx, svc, svcExists); err != nil {
		return err
	}
	if err := tx.putValue(tx.clusters, ck, c); err != nil {
		return err
	}
	tx.emit(Event{Kind: EventClusterUpsert, Cluster: c, Service: skey})
	return nil
}

// loadCluster returns the stored cluster, or the cluster that ensureCluster would create
// (DefaultHealthCheck, CreateIndex idx) with exists false. It writes nothing.
func (tx *Txn) loadCluster(idx uint64, key model.ServiceKey, name string) (model.Cluster, bool, error) {
	var c model.Cluster
	ok, err := tx.get(tx.clusters, clusterKey(key, name), &c)
	if err != nil {
		return model.Cluster{}, false, err
	}
	if ok {
		return c, true, nil
	}
	return model.Cluster{
		Namespace: key.Namespace, Group: key.Group, Service: key.Service, Name: name,
		HealthCheck: model.DefaultHealthCheck(), CreateIndex: idx, ModifyIndex: idx,
	}, false, nil
}

// ensureCluster creates the cluster with the default health check if it does not exist.
// It is a write-phase helper: the caller writes the service record.
func (tx *Txn) ensureCluster(idx uint64, key model.ServiceKey, name string) error {
	c, exists, err := tx.loadCluster(idx, key, name)
	if err != nil || exists {
		return err
	}
	if err := tx.putValue(tx.clusters, clusterKey(key, name), c); err != nil {
		return err
	}
	tx.emit(Event{Kind: EventClusterUpsert, Cluster: c, Service: key})
	return nil
}

// UpsertCluster runs Txn.UpsertCluster in its own transaction.
func (s *Store) UpsertCluster(idx uint64, c model.Cluster) error {
	return s.Update(func(tx *Txn) error { return tx.UpsertCluster(idx, c) })
}

// clusters reads the clusters of a service, sorted by name.
func (r *reader) clusterList(key model.ServiceKey) ([]model.Cluster, error) {
	var out []model.Cluster
	prefix := servicePrefix(key)
	c := r.clusters.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var cl model.Cluster
		if err := r.s.codec.decode(v, &cl); err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// Clusters returns a service's clusters sorted by name, with the service's ModifyIndex.
// model.ErrNotFound if the service does not exist.
func (s *Store) Clusters(ws *WatchSet, key model.ServiceKey) (uint64, []model.Cluster, error) {
	var (
		idx uint64
		out []model.Cluster
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		if idx, _, err = r.service(key); err != nil {
			return err
		}
		out, err = r.clusterList(key)
		return err
	})
	if err != nil {
		return idx, nil, err
	}
	return idx, out, nil
}

// Cluster returns one cluster with its service's ModifyIndex. model.ErrNotFound if the
// service or the cluster does not exist.
func (s *Store) Cluster(ws *WatchSet, key model.ServiceKey, name string) (uint64, model.Cluster, error) {
	var (
		idx uint64
		cl  model.Cluster
	)
	err := s.view(ws, func(r *reader) error {
		var err error
		if idx, _, err = r.service(key); err != nil {
			return err
		}
		ok := false
		if !badKeyPart(name) {
			if ok, err = r.get(r.clusters, clusterKey(key, name), &cl); err != nil {
				return err
			}
		}
		if !ok {
			return notFound("cluster %q of service %s", name, key)
		}
		return nil
	})
	if err != nil {
		return idx, model.Cluster{}, err
	}
	return idx, cl, nil
}
