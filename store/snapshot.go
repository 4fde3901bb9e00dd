package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// checkOpenTimeout bounds the wait for the lock of a file being checked.
const checkOpenTimeout = time.Second

// Snapshot is a consistent point-in-time view of the state file. It holds a read
// transaction until Close; writes proceed meanwhile (unless a write grows the file past
// the 1 GiB mapped up front, which waits for open snapshots). Close it promptly:
// Store.Close waits for open snapshots.
type Snapshot struct {
	btx     *bolt.Tx
	applied uint64
	once    sync.Once
}

// Snapshot opens a point-in-time view of the whole state.
func (s *Store) Snapshot() (*Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	btx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	applied, err := readU64(btx.Bucket(bucketMeta).Get(metaApplied))
	if err != nil {
		_ = btx.Rollback()
		return nil, err
	}
	return &Snapshot{btx: btx, applied: applied}, nil
}

// WriteTo streams the view as a complete bbolt file, which Restore and CheckFile accept.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := sn.btx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("write snapshot: %w", err)
	}
	return n, nil
}

// Size returns the number of bytes WriteTo writes.
func (sn *Snapshot) Size() int64 { return sn.btx.Size() }

// AppliedIndex returns the applied index of the view.
func (sn *Snapshot) AppliedIndex() uint64 { return sn.applied }

// Counts returns the number of records of each kind in the view: the counts CheckFile
// reports for the file WriteTo writes. It walks the buckets' pages without decoding any
// record.
func (sn *Snapshot) Counts() Counts {
	keys := func(name []byte) int { return sn.btx.Bucket(name).Stats().KeyN }
	return Counts{
		Namespaces: keys(bucketNamespaces),
		Services:   keys(bucketServices),
		Clusters:   keys(bucketClusters),
		Instances:  keys(bucketInstances),
		Members:    keys(bucketMembers),
	}
}

// Close releases the view. It is safe to call more than once.
func (sn *Snapshot) Close() error {
	var err error
	sn.once.Do(func() { err = sn.btx.Rollback() })
	return err
}

// Restore replaces the whole state with the bbolt file read from r (as written by
// Snapshot.WriteTo). The file is written beside the state file and checked first: if it
// is not a readable state file with the expected schema, Restore returns an error
// wrapping ErrCorrupt and nothing changed. Otherwise the index floor becomes
// max(old floor, old applied index, the file's floor)+1 and is stored in the new file,
// so indexes never go backwards, even across restarts. The new file replaces the old
// one atomically, every watcher wakes and subscribers receive EventReset. Snapshots of
// the old state stay readable until closed.
func (s *Store) Restore(r io.Reader) error {
	tmp, err := s.writeTemp(r)
	if err != nil {
		return err
	}
	defer func() {
		if tmp != "" {
			_ = os.Remove(tmp)
		}
	}()
	if _, _, err := CheckFile(tmp); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	closed, oldFloor := s.closed, s.floor
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	// Only writers change the applied index and only Restore changes the floor; both are
	// excluded by writeMu, so reads keep running while the new file is prepared.
	floor, applied, err := setFloor(tmp, max(oldFloor, s.applied.Load())+1)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	s.mu.Lock()
	old := s.db
	if err := os.Rename(tmp, s.path); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("restore: replace state file: %w", err)
	}
	tmp = ""
	syncDir(filepath.Dir(s.path))
	db, _, _, err := s.openDB(s.path)
	if err != nil {
		// The old file is gone; nothing can be served any more.
		s.closed = true
		s.mu.Unlock()
		s.closeRetired(old)
		s.watches.fireAll()
		s.feed.close()
		return fmt.Errorf("restore: reopen state: %w", err)
	}
	s.db, s.floor = db, floor
	s.applied.Store(applied)
	if err := s.loadSettings(db); err != nil {
		s.logger.Error("restore: reading the restored settings failed; keeping the defaults", "err", err)
		def := model.DefaultSettings()
		s.settings.Store(&def)
	}
	if err := s.loadACL(db); err != nil {
		// Lookups read the file instead, and fail the way it does.
		s.logger.Error("restore: reading the restored ACL state into memory failed", "err", err)
		s.acl.Store(nil)
	}
	s.mu.Unlock()

	s.closeRetired(old)
	s.watches.fireAll()
	s.feed.reset()
	s.logger.Info("state restored", "applied_index", applied, "index_floor", floor)
	return nil
}

// closeRetired closes a replaced database once its outstanding snapshots are closed.
func (s *Store) closeRetired(db *bolt.DB) {
	s.retired.Add(1)
	go func() {
		defer s.retired.Done()
		if err := db.Close(); err != nil {
			s.logger.Warn("closing replaced state file", "error", err)
		}
	}()
}

// writeTemp copies r to a synced temporary file beside the state file.
func (s *Store) writeTemp(r io.Reader) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("restore: create temporary file: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("restore: write temporary file: %w", err)
	}
	return f.Name(), nil
}

// setFloor raises the index floor stored in the file at path to at least floor and
// returns the resulting floor and the file's applied index.
func setFloor(path string, floor uint64) (uint64, uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: checkOpenTimeout})
	if err != nil {
		return 0, 0, fmt.Errorf("open %s: %w", path, err)
	}
	var applied uint64
	err = db.Update(func(btx *bolt.Tx) error {
		meta := btx.Bucket(bucketMeta)
		cur, err := readU64(meta.Get(metaFloor))
		if err != nil {
			return err
		}
		floor = max(floor, cur)
		if applied, err = readU64(meta.Get(metaApplied)); err != nil {
			return err
		}
		return meta.Put(metaFloor, u64(floor))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return floor, applied, err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Counts is the number of records of each kind in a state file.
type Counts struct {
	Namespaces int `json:"namespaces"`
	Services   int `json:"services"`
	Clusters   int `json:"clusters"`
	Instances  int `json:"instances"`
	Members    int `json:"members"`
}

// CheckFile opens the bbolt file at path read-only (waiting at most a second for its
// lock) and checks it whole: the schema version, bbolt's page consistency, and that
// every record decodes and is stored under its own key. It returns the record counts
// and the file's applied index. A file that fails a check yields an error wrapping
// ErrCorrupt; a file that cannot be opened at all (missing, locked) yields the
// underlying error.
func CheckFile(path string) (_ Counts, _ uint64, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return Counts{}, 0, err
	}
	// A damaged file can make bbolt read past the mapped file; turn that fault into a
	// panic, and every panic into ErrCorrupt.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v: %w", path, r, ErrCorrupt)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: checkOpenTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return Counts{}, 0, fmt.Errorf("%s: file is locked: %w", path, err)
		}
		return Counts{}, 0, fmt.Errorf("%s: %v: %w", path, err, ErrCorrupt)
	}
	defer func() { _ = db.Close() }()
	var (
		counts  Counts
		applied uint64
	)
	err = db.View(func(btx *bolt.Tx) error {
		if btx.Size() > info.Size() {
			return fmt.Errorf("file is %d bytes, its pages need %d: %w", info.Size(), btx.Size(), ErrCorrupt)
		}
		if err := checkSchema(btx); err != nil {
			return err
		}
		var err error
		if applied, err = readU64(btx.Bucket(bucketMeta).Get(metaApplied)); err != nil {
			return err
		}
		if _, err = readU64(btx.Bucket(bucketMeta).Get(metaFloor)); err != nil {
			return err
		}
		if counts, err = checkRecords(btx, newValueCodec()); err != nil {
			return err
		}
		var first error
		for e := range btx.Check() {
			if first == nil {
				first = e
			}
		}
		if first != nil {
			return fmt.Errorf("bbolt check: %v: %w", first, ErrCorrupt)
		}
		return nil
	})
	if err != nil {
		return Counts{}, 0, fmt.Errorf("%s: %w", path, err)
	}
	return counts, applied, nil
}

// checkRecords decodes every record, checks it is stored under its own key, and counts.
func checkRecords(btx *bolt.Tx, c valueCodec) (Counts, error) {
	var n Counts
	check := func(bucket []byte, count *int, decodeKey func(v []byte) ([]byte, error)) error {
		return btx.Bucket(bucket).ForEach(func(k, v []byte) error {
			want, err := decodeKey(v)
			if err != nil {
				return err
			}
			if !bytes.Equal(k, want) {
				return fmt.Errorf("bucket %s: record under key %q belongs under %q: %w", bucket, k, want, ErrCorrupt)
			}
			*count++
			return nil
		})
	}
	err := check(bucketNamespaces, &n.Namespaces, func(v []byte) ([]byte, error) {
		var ns model.Namespace
		err := c.decode(v, &ns)
		return []byte(ns.ID), err
	})
	if err == nil {
		err = check(bucketServices, &n.Services, func(v []byte) ([]byte, error) {
			var svc model.Service
			err := c.decode(v, &svc)
			return serviceKey(svc.Key()), err
		})
	}
	if err == nil {
		err = check(bucketClusters, &n.Clusters, func(v []byte) ([]byte, error) {
			var cl model.Cluster
			err := c.decode(v, &cl)
			return clusterKey(model.ServiceKey{Namespace: cl.Namespace, Group: cl.Group, Service: cl.Service}, cl.Name), err
		})
	}
	if err == nil {
		// Instances are most of a large state: check them in place (checkfast.go).
		ic := instanceKeyChecker{d: instanceDecoder{codec: c}}
		err = check(bucketInstances, &n.Instances, ic.keyOf)
	}
	if err == nil {
		err = check(bucketMembers, &n.Members, func(v []byte) ([]byte, error) {
			var m model.Member
			err := c.decode(v, &m)
			return []byte(m.ID), err
		})
	}
	if err == nil {
		err = btx.Bucket(bucketIndexes).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("index %q: value of %d bytes: %w", k, len(v), ErrCorrupt)
			}
			return nil
		})
	}
	return n, err
}
