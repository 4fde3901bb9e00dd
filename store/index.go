package store

import (
	"fmt"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// reader is one read transaction. It collects the watch keys of what it read; the
// store turns them into channels of the caller's WatchSet after the read.
type reader struct {
	s        *Store
	btx      *bolt.Tx
	watching bool
	watch    []string

	meta, namespaces, services, clusters, instances, members, indexes *bolt.Bucket
}

// view runs fn in one read transaction and adds the watches fn asked for to ws.
// The watch sequence is sampled before the transaction begins, so a commit that lands
// between the read and the watch registration wakes ws at once instead of being missed.
func (s *Store) view(ws *WatchSet, fn func(r *reader) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	seq := s.watches.sequence()
	btx, err := s.db.Begin(false)
	if err != nil {
		return fmt.Errorf("begin read transaction: %w", err)
	}
	defer func() { _ = btx.Rollback() }()
	r := reader{
		s:          s,
		btx:        btx,
		watching:   ws != nil,
		meta:       btx.Bucket(bucketMeta),
		namespaces: btx.Bucket(bucketNamespaces),
		services:   btx.Bucket(bucketServices),
		clusters:   btx.Bucket(bucketClusters),
		instances:  btx.Bucket(bucketInstances),
		members:    btx.Bucket(bucketMembers),
		indexes:    btx.Bucket(bucketIndexes),
	}
	err = fn(&r)
	if ws != nil && len(r.watch) > 0 {
		s.watches.add(ws, seq, r.watch)
	}
	return err
}

// addWatch asks for the watch channel of key.
func (r *reader) addWatch(key string) {
	if r.watching {
		r.watch = append(r.watch, key)
	}
}

// result turns a modify index into the index a read returns: at least the store's
// index floor, and at least 1.
func (r *reader) result(idx uint64) uint64 { return max(idx, r.s.floor, 1) }

// index returns an index-table entry.
func (r *reader) index(key string) (uint64, error) {
	return readU64(r.indexes.Get([]byte(key)))
}

// get decodes the value at key into v and reports whether it exists.
func (r *reader) get(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := r.s.codec.decode(raw, v); err != nil {
		return false, err
	}
	return true, nil
}

// notFoundIndex is the index of a read whose namespace or service does not exist: the
// namespace's services-list index, or the namespace-list index when the namespace is
// missing too. The read watches that list (which the item's creation changes), never
// the missing item itself, so reads of names that do not exist leave no channels behind.
func (r *reader) notFoundIndex(ns string) (uint64, error) {
	if r.namespaceExists(ns) {
		r.addWatch(watchServiceList(ns))
		idx, err := r.index(servicesIndexKey(ns))
		return r.result(idx), err
	}
	r.addWatch(watchNamespaces)
	idx, err := r.index(indexNamespaces)
	return r.result(idx), err
}

// service reads a service and watches it. When it is missing, the index returned is
// notFoundIndex's and the error wraps model.ErrNotFound.
func (r *reader) service(key model.ServiceKey) (uint64, model.Service, error) {
	if badKeyPart(key.Namespace, key.Group, key.Service) {
		idx, err := r.notFoundIndex(model.DefaultNamespace)
		if err != nil {
			return 0, model.Service{}, err
		}
		return idx, model.Service{}, notFound("service %s", key)
	}
	var svc model.Service
	ok, err := r.get(r.services, serviceKey(key), &svc)
	if err != nil {
		return 0, model.Service{}, err
	}
	if !ok {
		// Watch the lists, not the missing service: a channel per name asked for would
		// pile up, and creating the service changes its namespace's list anyway.
		idx, err := r.notFoundIndex(key.Namespace)
		if err != nil {
			return 0, model.Service{}, err
		}
		return idx, model.Service{}, notFound("service %s", key)
	}
	r.addWatch(watchService(key))
	return r.result(svc.ModifyIndex), svc, nil
}
