// Package store owns Roster's state: the bbolt schema, write transactions that take the
// Raft index, the per-item indexes used by blocking queries, watches, the change feed,
// and point-in-time snapshots and restores of the state file.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// openTimeout bounds the wait for the file lock of a state file another process holds.
const openTimeout = 5 * time.Second

// initialMmapSize is the address space mapped for the state file up front (the file
// itself grows only as needed). bbolt must remap when the file outgrows the mapping,
// and a remap waits for every open read transaction, snapshots included; mapping
// generously keeps writes from waiting on a snapshot being persisted.
const initialMmapSize = 1 << 30

// Options configures a Store.
type Options struct {
	// NoSync skips fsync on commit. Only for tests and benchmarks: a crash loses data.
	NoSync bool
	// SyncInterval, when positive, takes fsync off the commit path: commits are written
	// to the file but fsynced together every SyncInterval (and at Close). Only a caller
	// that can rebuild the state after a crash may use it — Roster's Raft log and
	// snapshots can. A file left by a crash (no clean Close) is checked whole at Open; a
	// file that fails the check is moved aside (state.db.corrupt-<unix time>) and an
	// empty state takes its place, so a torn file is never served.
	SyncInterval time.Duration
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// ReadCacheSize is the memory, in bytes, the read cache of service views and of the
	// responses encoded from them may hold (see ServiceView): 0 is
	// DefaultReadCacheSize, a negative size turns the cache off.
	ReadCacheSize int64
}

// Store is Roster's state in one bbolt file. It is safe for concurrent use: writes
// (Update and the single-operation wrappers) are serialized, reads run concurrently with
// them in their own read transactions, and Restore excludes both.
type Store struct {
	path   string
	opts   Options
	logger *slog.Logger
	codec  valueCodec

	// writeMu serializes writers, so commits, watch firing and events keep commit order.
	// Lock order: writeMu before mu.
	writeMu sync.Mutex
	// mu guards db, floor and closed. Reads and writes hold it shared; Restore and
	// Close hold it exclusively.
	mu     sync.RWMutex
	db     *bolt.DB
	floor  uint64
	closed bool

	applied atomic.Uint64
	// writeFault, when set, fails every write transaction (SetWriteFault).
	writeFault atomic.Pointer[error]
	// settings is the committed cluster-wide settings, read without a transaction by
	// the registry's admission of every write.
	settings atomic.Pointer[model.Settings]
	// acl is the committed ACL state in memory, which authenticating every request reads
	// without a transaction; nil when it could not be read (lookups then read the file).
	acl     atomic.Pointer[aclCache]
	watches *watchRegistry
	feed    *feed
	// views is the read cache; nil when it is off.
	views *viewCache
	// retired tracks databases replaced by Restore that close once their
	// outstanding snapshots are released.
	retired sync.WaitGroup

	// Interval sync (Options.SyncInterval > 0).
	unsynced  atomic.Bool
	stopSync  chan struct{}
	syncDone  chan struct{}
	recovered string // where a corrupt file found at Open was moved, if any
}

// Open opens the state file at path, creating it and its schema when it does not exist.
// The namespace "public" always exists. A file with another schema, or a file that is
// not a state file, is refused with ErrCorrupt.
func Open(path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path:    path,
		opts:    opts,
		logger:  opts.Logger,
		codec:   newValueCodec(),
		watches: newWatchRegistry(),
		feed:    newFeed(),
	}
	switch {
	case opts.ReadCacheSize == 0:
		s.views = newViewCache(DefaultReadCacheSize)
	case opts.ReadCacheSize > 0:
		s.views = newViewCache(opts.ReadCacheSize)
	}
	if opts.SyncInterval > 0 {
		if err := s.checkAfterCrash(); err != nil {
			return nil, err
		}
	}
	db, floor, applied, err := s.openDB(path)
	if err != nil {
		return nil, err
	}
	s.db, s.floor = db, floor
	s.applied.Store(applied)
	if err := s.loadSettings(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.loadACL(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	if opts.SyncInterval > 0 {
		s.stopSync, s.syncDone = make(chan struct{}), make(chan struct{})
		go s.syncLoop(opts.SyncInterval)
	}
	s.logger.Debug("state opened", "path", path, "applied_index", applied, "index_floor", floor)
	return s, nil
}

// openDB opens (creating if needed) a read-write bbolt file and checks or writes the
// schema. It returns the stored index floor and applied index.
func (s *Store) openDB(path string) (*bolt.DB, uint64, uint64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, 0, 0, fmt.Errorf("create state directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         openTimeout,
		NoSync:          s.opts.NoSync || s.opts.SyncInterval > 0,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, 0, 0, fmt.Errorf("open %s: file is locked by another process: %w", path, err)
		}
		return nil, 0, 0, fmt.Errorf("open %s: %v: %w", path, err, ErrCorrupt)
	}
	var floor, applied uint64
	err = db.Update(func(btx *bolt.Tx) error {
		if btx.Bucket(bucketMeta) == nil {
			if err := initSchema(btx, s.codec); err != nil {
				return err
			}
		}
		if err := checkSchema(btx); err != nil {
			return err
		}
		meta := btx.Bucket(bucketMeta)
		var err error
		if floor, err = readU64(meta.Get(metaFloor)); err != nil {
			return err
		}
		applied, err = readU64(meta.Get(metaApplied))
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, 0, 0, fmt.Errorf("open %s: %w", path, err)
	}
	return db, floor, applied, nil
}

// initSchema creates the buckets, the schema version and the "public" namespace in an
// empty file. It refuses a file that already holds other buckets.
func initSchema(btx *bolt.Tx, c valueCodec) error {
	var foreign []byte
	_ = btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		foreign = name
		return errors.New("stop")
	})
	if foreign != nil {
		return fmt.Errorf("not a roster state file (has bucket %q): %w", foreign, ErrCorrupt)
	}
	for _, name := range allBuckets() {
		if _, err := btx.CreateBucket(name); err != nil {
			return err
		}
	}
	if err := btx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion)); err != nil {
		return err
	}
	// Every replica creates the same record, so it carries index 0, not a time-dependent value.
	b, err := c.encode(model.Namespace{ID: model.DefaultNamespace, Name: model.DefaultNamespace})
	if err != nil {
		return err
	}
	return btx.Bucket(bucketNamespaces).Put([]byte(model.DefaultNamespace), b)
}

// checkSchema verifies the schema version and that every bucket exists. A newer schema
// is ErrNewerSchema, anything else wrong ErrCorrupt.
func checkSchema(btx *bolt.Tx) error {
	meta := btx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("no meta bucket: %w", ErrCorrupt)
	}
	v := meta.Get(metaSchema)
	if len(v) != 8 {
		return fmt.Errorf("no schema version: %w", ErrCorrupt)
	}
	switch got, _ := readU64(v); {
	case got > schemaVersion:
		return fmt.Errorf("%w: schema version %d, and this build reads version %d only: run a release that reads it", ErrNewerSchema, got, schemaVersion)
	case got != schemaVersion:
		return fmt.Errorf("schema version %d, want %d: %w", got, schemaVersion, ErrCorrupt)
	}
	for _, name := range allBuckets() {
		if btx.Bucket(name) == nil {
			return fmt.Errorf("missing bucket %q: %w", name, ErrCorrupt)
		}
	}
	return nil
}

// Close closes the state file. Blocked watchers wake up, subscribers' channels close,
// and later calls return ErrClosed. It waits for outstanding snapshots to be closed.
func (s *Store) Close() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	db := s.db
	s.mu.Unlock()

	s.watches.fireAll()
	s.feed.close()
	if s.views != nil {
		s.views.reset()
	}
	var err error
	if s.stopSync != nil {
		close(s.stopSync)
		<-s.syncDone
		if err = db.Sync(); err == nil {
			err = s.markClean()
		}
	}
	err = errors.Join(err, db.Close())
	s.retired.Wait()
	return err
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// AppliedIndex returns the applied index stored by the last committed write
// transaction (or found in the file at Open or Restore).
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// IndexFloor returns the lowest index any read returns. It rises on every Restore so
// that indexes never go backwards, and it survives restarts.
func (s *Store) IndexFloor() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.floor
}

// SetWriteFault makes every write transaction fail with err instead of committing
// (nothing is written), until it is called with nil: fault tests simulate a full or
// failing disk with it.
func (s *Store) SetWriteFault(err error) {
	if err == nil {
		s.writeFault.Store(nil)
		return
	}
	s.writeFault.Store(&err)
}

// Update runs fn in one write transaction. If fn returns an error, or an operation hit
// a storage failure, nothing of the transaction is kept. After a successful commit the
// read cache drops the views of the services changed, then the applied index moves,
// the watches of everything changed fire and the change feed receives the commit's events;
// nothing fires on rollback. A transaction whose operations were all no-ops is not
// committed at all.
func (s *Store) Update(fn func(tx *Txn) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	btx, err := s.db.Begin(true)
	if err != nil {
		s.mu.RUnlock()
		return fmt.Errorf("begin write transaction: %w", err)
	}
	tx, done := newTxn(s, btx), false
	defer func() {
		if !done {
			_ = btx.Rollback()
		}
		s.mu.RUnlock()
	}()
	if err := tx.init(); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if tx.broken != nil {
		return tx.broken
	}
	if !tx.dirty {
		return nil
	}
	if fault := s.writeFault.Load(); fault != nil {
		return *fault
	}
	var aclNext *aclCache
	if _, ok := tx.touched[watchACL]; ok {
		// Built from what is about to be committed, published once it is.
		if aclNext, err = readACLCache(btx, &s.codec); err != nil {
			return fmt.Errorf("read the changed ACL state: %w", err)
		}
	}
	done = true
	if err := btx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.views != nil && len(tx.touched) > 0 {
		// Before the applied index moves: a read that waits for it must not find the
		// views from before this commit.
		s.views.invalidate(tx.touched)
	}
	s.applied.Store(tx.applied)
	if tx.settings != nil {
		s.settings.Store(tx.settings)
	}
	if aclNext != nil {
		s.acl.Store(aclNext)
	}
	if s.stopSync != nil {
		s.unsynced.Store(true)
	}
	if len(tx.touched) > 0 {
		tx.touched[watchAll] = struct{}{}
		s.watches.fire(tx.touched)
	}
	if len(tx.events) > 0 {
		for i := range tx.events {
			tx.events[i].Index = tx.applied
		}
		s.feed.publish(tx.events)
	}
	return nil
}
