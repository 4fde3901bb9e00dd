package store

import (
	"fmt"

	"github.com/rosterhq/roster/model"
)

// metaClusterID is the cluster's identity in the meta bucket.
var metaClusterID = []byte("cluster-id")

// SetClusterID records the cluster's identity. It is set once: setting the same id
// again changes nothing, another id is refused with model.ErrConflict.
func (tx *Txn) SetClusterID(id string) error {
	if err := model.ValidateClusterID(id); err != nil {
		return err
	}
	cur, err := tx.ClusterID()
	if err != nil {
		return err
	}
	switch cur {
	case id:
		return nil
	case "":
		return tx.put(tx.meta, metaClusterID, []byte(id))
	}
	return fmt.Errorf("%w: the cluster already has the identity %q; %q cannot replace it", model.ErrConflict, cur, id)
}

// ClusterID returns the cluster's identity as of this transaction ("" before it is set).
func (tx *Txn) ClusterID() (string, error) {
	return string(tx.meta.Get(metaClusterID)), nil
}

// AdoptIdentity gives a state file another cluster's identity and members: the cluster
// id becomes id (none when "") and the member table holds exactly members, whatever the
// file held before. It is for a state file about to be restored into a running cluster,
// which must keep its own identity and must never learn another cluster's addresses; it
// is not a replicated command.
func (tx *Txn) AdoptIdentity(id string, members []model.Member) error {
	if id == "" {
		if err := tx.del(tx.meta, metaClusterID); err != nil {
			return err
		}
	} else {
		if err := model.ValidateClusterID(id); err != nil {
			return err
		}
		if err := tx.put(tx.meta, metaClusterID, []byte(id)); err != nil {
			return err
		}
	}
	var stale [][]byte
	if err := tx.members.ForEach(func(k, _ []byte) error {
		stale = append(stale, append([]byte(nil), k...))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range stale {
		if err := tx.del(tx.members, k); err != nil {
			return err
		}
	}
	for _, m := range members {
		if err := model.ValidateMember(m); err != nil {
			return err
		}
		if err := tx.putValue(tx.members, []byte(m.ID), m); err != nil {
			return err
		}
	}
	tx.touch(watchMembers)
	return nil
}

// ClusterID returns the cluster's identity ("" before the first leader set it).
func (s *Store) ClusterID() (string, error) {
	var id string
	err := s.view(nil, func(r *reader) error {
		id = string(r.meta.Get(metaClusterID))
		return nil
	})
	return id, err
}
