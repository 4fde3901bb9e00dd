package store

import "github.com/rosterhq/roster/model"

// UpsertMember records a server's Raft and HTTP addresses. Storing the record already
// stored changes nothing.
func (tx *Txn) UpsertMember(idx uint64, m model.Member) error {
	if err := model.ValidateMember(m); err != nil {
		return err
	}
	key := []byte(m.ID)
	if same, err := tx.sameAsStored(tx.members, key, m); err != nil || same {
		return err
	}
	if err := tx.putValue(tx.members, key, m); err != nil {
		return err
	}
	tx.touch(watchMembers)
	return tx.bumpIndex(indexMembers, idx)
}

// RemoveMember forgets a server's addresses. Removing an unknown id changes nothing and
// is not an error, so removal can be retried.
func (tx *Txn) RemoveMember(idx uint64, id string) error {
	if id == "" {
		return model.Invalid("id", "must not be empty")
	}
	key := []byte(id)
	if tx.members.Get(key) == nil {
		return nil
	}
	if err := tx.del(tx.members, key); err != nil {
		return err
	}
	tx.touch(watchMembers)
	return tx.bumpIndex(indexMembers, idx)
}

// UpsertMember runs Txn.UpsertMember in its own transaction.
func (s *Store) UpsertMember(idx uint64, m model.Member) error {
	return s.Update(func(tx *Txn) error { return tx.UpsertMember(idx, m) })
}

// RemoveMember runs Txn.RemoveMember in its own transaction.
func (s *Store) RemoveMember(idx uint64, id string) error {
	return s.Update(func(tx *Txn) error { return tx.RemoveMember(idx, id) })
}

// Members returns every member record sorted by ID, with the member-list index.
func (s *Store) Members(ws *WatchSet) (uint64, []model.Member, error) {
	var (
		idx uint64
		out []model.Member
	)
	err := s.view(ws, func(r *reader) error {
		r.addWatch(watchMembers)
		i, err := r.index(indexMembers)
		if err != nil {
			return err
		}
		idx = r.result(i)
		return r.members.ForEach(func(_, v []byte) error {
			var m model.Member
			if err := r.s.codec.decode(v, &m); err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return 0, nil, err
	}
	return idx, out, nil
}

// Member returns the record of one member, and false if there is none (or the store is
// closed or unreadable).
func (s *Store) Member(id string) (model.Member, bool) {
	var (
		m  model.Member
		ok bool
	)
	err := s.view(nil, func(r *reader) error {
		var err error
		ok, err = r.get(r.members, []byte(id), &m)
		return err
	})
	if err != nil || !ok {
		return model.Member{}, false
	}
	return m, true
}
