package store

import (
	"bytes"
	"fmt"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// Txn is one write transaction, passed to the function given to Store.Update. Its
// operations take the Raft index of the entry they apply. Each operation checks all its
// preconditions before it writes anything, so an operation that returns an error leaves
// the transaction as it was and the next operation can proceed. A Txn must not be used
// after that function returns.
type Txn struct {
	s   *Store
	btx *bolt.Tx

	meta, indexes, namespaces, services, clusters, instances, members *bolt.Bucket

	applied uint64
	touched map[string]struct{}
	events  []Event
	// dirty is set by the first write; a clean transaction is rolled back instead of committed.
	dirty bool
	// broken holds a storage failure after which the transaction must not commit.
	broken error
	// settings are the settings this transaction stored, published on commit.
	settings *model.Settings
}

func newTxn(s *Store, btx *bolt.Tx) *Txn {
	return &Txn{s: s, btx: btx}
}

func (tx *Txn) init() error {
	tx.meta = tx.btx.Bucket(bucketMeta)
	tx.indexes = tx.btx.Bucket(bucketIndexes)
	tx.namespaces = tx.btx.Bucket(bucketNamespaces)
	tx.services = tx.btx.Bucket(bucketServices)
	tx.clusters = tx.btx.Bucket(bucketClusters)
	tx.instances = tx.btx.Bucket(bucketInstances)
	tx.members = tx.btx.Bucket(bucketMembers)
	if tx.meta == nil || tx.indexes == nil || tx.namespaces == nil || tx.services == nil ||
		tx.clusters == nil || tx.instances == nil || tx.members == nil {
		return fmt.Errorf("missing bucket: %w", ErrCorrupt)
	}
	v, err := readU64(tx.meta.Get(metaApplied))
	tx.applied = v
	return err
}

// AppliedIndex returns the applied index as of this transaction.
func (tx *Txn) AppliedIndex() uint64 { return tx.applied }

// SetAppliedIndex records idx as the applied index in this transaction. The applied
// index never goes backwards: a lower idx is refused with model.ErrConflict.
func (tx *Txn) SetAppliedIndex(idx uint64) error {
	if idx < tx.applied {
		return conflict("applied index %d is below the stored %d", idx, tx.applied)
	}
	if idx == tx.applied {
		return nil
	}
	if err := tx.put(tx.meta, metaApplied, u64(idx)); err != nil {
		return err
	}
	tx.applied = idx
	return nil
}

// fail records a storage failure: the transaction will not commit.
func (tx *Txn) fail(err error) error {
	if tx.broken == nil {
		tx.broken = err
	}
	return err
}

func (tx *Txn) put(b *bolt.Bucket, key, val []byte) error {
	if err := b.Put(key, val); err != nil {
		return tx.fail(fmt.Errorf("put: %w", err))
	}
	tx.dirty = true
	return nil
}

func (tx *Txn) del(b *bolt.Bucket, key []byte) error {
	if err := b.Delete(key); err != nil {
		return tx.fail(fmt.Errorf("delete: %w", err))
	}
	tx.dirty = true
	return nil
}

// get decodes the value at key into v and reports whether it exists.
func (tx *Txn) get(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := tx.s.codec.decode(raw, v); err != nil {
		return false, tx.fail(err)
	}
	return true, nil
}

// putValue encodes v and stores it at key.
func (tx *Txn) putValue(b *bolt.Bucket, key []byte, v any) error {
	raw, err := tx.s.codec.encode(v)
	if err != nil {
		return tx.fail(err)
	}
	return tx.put(b, key, raw)
}

// sameAsStored reports whether v encodes to exactly the bytes stored at key.
func (tx *Txn) sameAsStored(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	enc, err := tx.s.codec.encode(v)
	if err != nil {
		return false, tx.fail(err)
	}
	return bytes.Equal(raw, enc), nil
}

func (tx *Txn) touch(keys ...string) {
	if tx.touched == nil {
		tx.touched = make(map[string]struct{}, 4)
	}
	for _, k := range keys {
		tx.touched[k] = struct{}{}
	}
}

func (tx *Txn) emit(e Event) { tx.events = append(tx.events, e) }

// index returns the value of an index-table entry.
func (tx *Txn) index(key string) (uint64, error) {
	v, err := readU64(tx.indexes.Get([]byte(key)))
	if err != nil {
		return 0, tx.fail(err)
	}
	return v, nil
}

// bumpIndex raises an index-table entry to idx; it never lowers one.
func (tx *Txn) bumpIndex(key string, idx uint64) error {
	cur, err := tx.index(key)
	if err != nil {
		return err
	}
	if idx <= cur {
		return nil
	}
	return tx.put(tx.indexes, []byte(key), u64(idx))
}

// keysWithPrefix returns copies of the keys of b that start with prefix.
func keysWithPrefix(b *bolt.Bucket, prefix []byte) [][]byte {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	return keys
}

// hasPrefix reports whether b holds any key starting with prefix.
func hasPrefix(b *bolt.Bucket, prefix []byte) bool {
	k, _ := b.Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// SetAppliedIndex runs Txn.SetAppliedIndex in its own transaction.
func (s *Store) SetAppliedIndex(idx uint64) error {
	return s.Update(func(tx *Txn) error { return tx.SetAppliedIndex(idx) })
}
