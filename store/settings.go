package store

import (
	"fmt"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// hardLimits are the bounds every write is applied under: compiled-in ceilings, never a
// node's configuration, so that every replica applies every entry the same way. The
// registry admits writes under the tighter cluster-wide settings before they reach the log.
var hardLimits = model.HardLimits()

// UpdateSettings replaces the cluster-wide settings (ModifyIndex becomes idx). Storing
// the settings already stored changes nothing.
func (tx *Txn) UpdateSettings(idx uint64, s model.Settings) error {
	if err := model.ValidateSettings(s); err != nil {
		return err
	}
	cur, err := tx.Settings()
	if err != nil {
		return err
	}
	s.ModifyIndex = cur.ModifyIndex
	if cur.ModifyIndex != 0 && cur == s {
		return nil
	}
	s.ModifyIndex = idx
	if err := tx.putValue(tx.meta, metaSettings, s); err != nil {
		return err
	}
	tx.settings = &s
	tx.touch(watchSettings)
	return nil
}

// Settings returns the settings as of this transaction (DefaultSettings when never set).
func (tx *Txn) Settings() (model.Settings, error) {
	s := model.DefaultSettings()
	if _, err := tx.get(tx.meta, metaSettings, &s); err != nil {
		return s, err
	}
	return s, nil
}

// Settings returns the cluster-wide settings (DefaultSettings when never set) with the
// index of their last change (at least the index floor, and at least 1). A read without
// a watch set is served from memory, without a transaction: the registry admits every
// write under it.
func (s *Store) Settings(ws *WatchSet) (uint64, model.Settings, error) {
	if ws == nil {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.closed {
			return 0, model.DefaultSettings(), ErrClosed
		}
		set := *s.settings.Load()
		return max(set.ModifyIndex, s.floor, 1), set, nil
	}
	set := model.DefaultSettings()
	var idx uint64
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchSettings)
		if _, err := r.get(r.meta, metaSettings, &set); err != nil {
			return err
		}
		idx = r.result(set.ModifyIndex)
		return nil
	})
	if err != nil {
		return 0, model.DefaultSettings(), err
	}
	return idx, set, nil
}

// UpdateSettings runs Txn.UpdateSettings in its own transaction.
func (s *Store) UpdateSettings(idx uint64, set model.Settings) error {
	return s.Update(func(tx *Txn) error { return tx.UpdateSettings(idx, set) })
}

// InstanceIndex returns the instance's modify index, 0 when it does not exist.
func (tx *Txn) InstanceIndex(ref model.InstanceRef) (uint64, error) {
	if badKeyPart(ref.Namespace, ref.Group, ref.Service, ref.IP) {
		return 0, nil
	}
	var in model.Instance
	ok, err := tx.get(tx.instances, instanceKey(ref), &in)
	if err != nil || !ok {
		return 0, err
	}
	return in.ModifyIndex, nil
}

// ServiceIndex returns the service's modify index (which changes with its clusters and
// instances too), 0 when it does not exist.
func (tx *Txn) ServiceIndex(key model.ServiceKey) (uint64, error) {
	if badKeyPart(key.Namespace, key.Group, key.Service) {
		return 0, nil
	}
	var svc model.Service
	ok, err := tx.get(tx.services, serviceKey(key), &svc)
	if err != nil || !ok {
		return 0, err
	}
	return svc.ModifyIndex, nil
}

// ClusterIndex returns the cluster's modify index, 0 when it does not exist.
func (tx *Txn) ClusterIndex(key model.ServiceKey, name string) (uint64, error) {
	if badKeyPart(key.Namespace, key.Group, key.Service, name) {
		return 0, nil
	}
	var c model.Cluster
	ok, err := tx.get(tx.clusters, clusterKey(key, name), &c)
	if err != nil || !ok {
		return 0, err
	}
	return c.ModifyIndex, nil
}

// loadSettings reads the committed settings of db into memory.
func (s *Store) loadSettings(db *bolt.DB) error {
	set := model.DefaultSettings()
	err := db.View(func(btx *bolt.Tx) error {
		raw := btx.Bucket(bucketMeta).Get(metaSettings)
		if raw == nil {
			return nil
		}
		return s.codec.decode(raw, &set)
	})
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	s.settings.Store(&set)
	return nil
}
