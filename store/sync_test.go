package store

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
)

func openSynced(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{SyncInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// A clean Close leaves the marker; the next Open consumes it, so that a crash after
// that Open would be noticed.
func TestSyncInterval_CleanCloseMarker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openSynced(t, path)
	mustDo(t, s.RegisterInstance(5, testInstance("127.100.0.1", 80)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + cleanSuffix); err != nil {
		t.Fatalf("no clean marker after Close: %v", err)
	}
	s = openSynced(t, path)
	defer s.Close()
	if _, err := os.Stat(path + cleanSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker still present after Open: %v", err)
	}
	if _, in, err := s.Instances(nil, testKey); err != nil || len(in) != 1 {
		t.Fatalf("after reopen: %v %v", in, err)
	}
}

// The background fsync runs without Close: a copy of the file taken after it (as a
// crash would leave it, no marker) passes the crash check and keeps every commit.
func TestSyncInterval_UncleanFileChecked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := openSynced(t, path)
	defer s.Close()
	for i := 1; i <= 20; i++ {
		mustDo(t, s.Update(func(tx *Txn) error {
			if err := tx.RegisterInstance(uint64(i), testInstance("127.100.0.1", i)); err != nil {
				return err
			}
			return tx.SetAppliedIndex(uint64(i))
		}))
	}
	wait.For(t, 5*time.Second, "the background fsync", func() bool { return !s.unsynced.Load() })
	crashed := filepath.Join(dir, "crashed.db")
	copyFile(t, path, crashed)
	c := openSynced(t, crashed)
	defer c.Close()
	if c.Recovered() != "" {
		t.Fatalf("an intact file was moved aside to %s", c.Recovered())
	}
	if c.AppliedIndex() != 20 {
		t.Fatalf("applied index %d, want 20", c.AppliedIndex())
	}
	if _, in, err := c.Instances(nil, testKey); err != nil || len(in) != 20 {
		t.Fatalf("instances after crash check: %d %v", len(in), err)
	}
}

// A torn file left by a crash is never served: it is moved aside and the store starts
// empty (applied index 0) for the caller to rebuild.
func TestSyncInterval_CorruptFileMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := openSynced(t, path)
	for i := 1; i <= 50; i++ {
		mustDo(t, s.Update(func(tx *Txn) error {
			if err := tx.RegisterInstance(uint64(i), testInstance("127.100.0.2", i)); err != nil {
				return err
			}
			return tx.SetAppliedIndex(uint64(i))
		}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Simulate a crash that tore the file: no marker, and garbage over a data page.
	if err := os.Remove(path + cleanSuffix); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	garbage := []byte(strings.Repeat("\xff", 4096))
	for off := int64(2 * 4096); off < info.Size(); off += 4096 {
		if _, err := f.WriteAt(garbage, off); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.Close()

	c := openSynced(t, path)
	defer c.Close()
	if c.Recovered() == "" {
		t.Fatal("a torn file was not detected")
	}
	if _, err := os.Stat(c.Recovered()); err != nil {
		t.Fatalf("the torn file was not kept aside: %v", err)
	}
	if c.AppliedIndex() != 0 {
		t.Fatalf("rebuilt store has applied index %d, want 0", c.AppliedIndex())
	}
	if _, _, err := c.Instances(nil, testKey); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("rebuilt store serves old data: %v", err)
	}
}
