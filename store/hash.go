package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// hashedBuckets are the buckets a state hash covers, in a fixed order: everything the
// replicated log determines. The meta bucket contributes only its replicated keys
// (settings, cluster id): the applied index is given explicitly, and the index floor and
// the schema are a node's own.
var hashedBuckets = [][]byte{bucketIndexes, bucketNamespaces, bucketServices, bucketClusters, bucketInstances, bucketMembers, bucketACL}

var hashedMeta = [][]byte{metaSettings, metaClusterID}

// hashState is a SHA-256 over the replicated content of btx, as of applied: the bytes
// of every key and value, length-prefixed, bucket by bucket in key order. Replicas that
// applied the same log up to applied have the same hash; a flipped byte anywhere in
// the replicated state changes it. It reads raw bytes and decodes nothing, so it costs
// one pass over the file.
func hashState(btx *bolt.Tx, applied uint64) (string, error) {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], applied)
	h.Write(n[:])
	meta := btx.Bucket(bucketMeta)
	for _, k := range hashedMeta {
		put(k)
		if meta != nil {
			put(meta.Get(k))
		}
	}
	for _, name := range hashedBuckets {
		b := btx.Bucket(name)
		if bytes.Equal(name, bucketACL) && (b == nil || emptyBucket(b)) {
			// Optional: a state without ACLs hashes as it did before they existed.
			continue
		}
		put(name)
		if b == nil {
			continue
		}
		if err := b.ForEach(func(k, v []byte) error {
			put(k)
			put(v)
			return nil
		}); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// StateHash is the hash of the state as this transaction sees it, for applied index
// applied (the entry being applied, which may not be stored yet).
func (tx *Txn) StateHash(applied uint64) (string, error) { return hashState(tx.btx, applied) }

// StateHash returns the applied index and the hash of the state at it, from one read
// transaction.
func (s *Store) StateHash() (uint64, string, error) {
	var (
		applied uint64
		sum     string
	)
	err := s.view(nil, func(r *reader) error {
		var err error
		if applied, err = readU64(r.meta.Get(metaApplied)); err != nil {
			return err
		}
		sum, err = hashState(r.btx, applied)
		return err
	})
	return applied, sum, err
}

// HashFile opens the state file at path read-only and returns its applied index and the
// hash of its state (as StateHash), for checks of a stopped node's files.
func HashFile(path string) (uint64, string, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: checkOpenTimeout})
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = db.Close() }()
	var (
		applied uint64
		sum     string
	)
	err = db.View(func(btx *bolt.Tx) error {
		meta := btx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("no meta bucket: %w", ErrCorrupt)
		}
		var err error
		if applied, err = readU64(meta.Get(metaApplied)); err != nil {
			return err
		}
		sum, err = hashState(btx, applied)
		return err
	})
	return applied, sum, err
}

// ClusterIDOfFile returns the cluster id recorded in the state file at path ("" when
// none), opening it read-only.
func ClusterIDOfFile(path string) (string, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: checkOpenTimeout})
	if err != nil {
		return "", err
	}
	defer func() { _ = db.Close() }()
	var id string
	err = db.View(func(btx *bolt.Tx) error {
		if meta := btx.Bucket(bucketMeta); meta != nil {
			id = string(meta.Get(metaClusterID))
		}
		return nil
	})
	return id, err
}

// emptyBucket reports whether b holds no key.
func emptyBucket(b *bolt.Bucket) bool {
	k, _ := b.Cursor().First()
	return k == nil
}
