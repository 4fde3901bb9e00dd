package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// cleanSuffix names the marker a clean Close leaves beside the state file in interval
// sync mode: its presence at Open says the file was fsynced and closed, not torn by a crash.
const cleanSuffix = ".clean"

// Recovered returns where Open moved a state file that failed its crash check ("" when
// it did not): the store then started empty and must be rebuilt by its caller.
func (s *Store) Recovered() string { return s.recovered }

// Sync forces the state file to disk now.
func (s *Store) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	s.unsynced.Store(false)
	return s.db.Sync()
}

// syncLoop fsyncs the file every interval when something was committed since the
// last fsync.
func (s *Store) syncLoop(every time.Duration) {
	defer close(s.syncDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopSync:
			return
		case <-t.C:
			if !s.unsynced.Load() {
				continue
			}
			if err := s.Sync(); err != nil && !errors.Is(err, ErrClosed) {
				// The Raft log still holds every entry, so a later start rebuilds what
				// a failed fsync may lose; keep trying and say so loudly.
				s.unsynced.Store(true)
				s.logger.Error("fsync of the state file failed", "path", s.path, "err", err)
			}
		}
	}
}

// markClean records a clean Close: the file was fsynced after its last commit.
func (s *Store) markClean() error {
	f, err := os.OpenFile(s.path+cleanSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("mark clean shutdown: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("mark clean shutdown: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("mark clean shutdown: %w", err)
	}
	syncDir(filepath.Dir(s.path))
	return nil
}

// checkAfterCrash runs before the state file is opened in interval sync mode. After a
// clean Close it only removes the marker (so that a crash from now on is noticed).
// Otherwise the file may hold commits that never reached the disk whole, so it is checked
// completely; a file that fails is moved aside and the store starts empty.
func (s *Store) checkAfterCrash() error {
	marker := s.path + cleanSuffix
	if _, err := os.Stat(marker); err == nil {
		if err := os.Remove(marker); err != nil {
			return fmt.Errorf("clear clean-shutdown marker: %w", err)
		}
		syncDir(filepath.Dir(s.path))
		return nil
	}
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	start := time.Now()
	_, applied, err := CheckFile(s.path)
	if err == nil {
		s.logger.Info("state file passed its check after an unclean shutdown",
			"path", s.path, "applied_index", applied, "took", time.Since(start))
		return nil
	}
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	aside := s.path + ".corrupt-" + strconv.FormatInt(time.Now().Unix(), 10)
	if rerr := os.Rename(s.path, aside); rerr != nil {
		return fmt.Errorf("move corrupt state file aside: %w (it failed its check: %v)", rerr, err)
	}
	s.recovered = aside
	s.logger.Error("state file failed its check after an unclean shutdown; starting empty, to be rebuilt from the Raft snapshot and log",
		"path", s.path, "moved_to", aside, "err", err)
	syncDir(filepath.Dir(s.path))
	return nil
}

// FileAppliedIndex reads the applied index stored in the state file at path (opened
// read-only) without checking the rest of the file.
func FileAppliedIndex(path string) (uint64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: checkOpenTimeout})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	var applied uint64
	err = db.View(func(btx *bolt.Tx) error {
		meta := btx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("no meta bucket: %w", ErrCorrupt)
		}
		var err error
		applied, err = readU64(meta.Get(metaApplied))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return applied, nil
}
