package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rosterhq/roster/model"
)

func TestOpen_CreatesPublicNamespace(t *testing.T) {
	s := mustNewStore(t)
	idx, nss, err := s.Namespaces(nil)
	mustDo(t, err)
	if idx < 1 {
		t.Fatalf("index = %d, want >= 1", idx)
	}
	if len(nss) != 1 || nss[0].ID != model.DefaultNamespace {
		t.Fatalf("namespaces = %+v, want only %q", nss, model.DefaultNamespace)
	}
}

func TestOpen_ReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	mustDo(t, err)
	mustDo(t, s.Update(func(tx *Txn) error {
		if err := tx.RegisterInstance(7, testInstance("127.100.0.1", 80)); err != nil {
			return err
		}
		return tx.SetAppliedIndex(7)
	}))
	before := mustDump(t, s)
	mustDo(t, s.Close())

	s2 := mustOpenAt(t, path)
	if got := s2.AppliedIndex(); got != 7 {
		t.Fatalf("AppliedIndex after reopen = %d, want 7", got)
	}
	assertUnchanged(t, s2, before)
}

func TestOpen_RefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	writeBolt := func(name string, fn func(tx *bolt.Tx) error) string {
		p := filepath.Join(dir, name)
		db, err := bolt.Open(p, 0o600, nil)
		mustDo(t, err)
		mustDo(t, db.Update(fn))
		mustDo(t, db.Close())
		return p
	}
	otherSchema := writeBolt("schema.db", func(tx *bolt.Tx) error {
		for _, b := range allBuckets() {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(0))
	})
	foreign := writeBolt("raft.db", func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("logs"))
		return err
	})
	garbage := filepath.Join(dir, "garbage.db")
	mustDo(t, os.WriteFile(garbage, []byte("this is not a bbolt file, not even close........"), 0o600))

	for name, path := range map[string]string{"other schema": otherSchema, "foreign bbolt": foreign, "garbage": garbage} {
		t.Run(name, func(t *testing.T) {
			s, err := Open(path, Options{})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// A state file of a newer schema is refused as such — not as corrupt, so that no crash
// recovery moves it aside — and left exactly as it was.
func TestOpen_RefusesNewerSchemaUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	mustDo(t, err)
	mustDo(t, db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets() {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion+1))
	}))
	mustDo(t, db.Close())
	before, err := os.ReadFile(path)
	mustDo(t, err)
	for name, opts := range map[string]Options{"plain": {}, "after a crash": {SyncInterval: time.Second}} {
		s, err := Open(path, opts)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%s: Open succeeded", name)
		}
		if !errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "schema version 2") {
			t.Fatalf("%s: err = %v, want ErrNewerSchema naming the version", name, err)
		}
		after, err := os.ReadFile(path)
		mustDo(t, err)
		if !bytes.Equal(before, after) {
			t.Fatalf("%s: the file changed", name)
		}
		if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
			t.Fatalf("%s: moved aside: %v", name, m)
		}
	}
}

func TestStore_ClosedReturnsErrClosed(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.Close())
	if err := s.RegisterInstance(1, testInstance("127.100.0.1", 80)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	if _, _, err := s.Namespaces(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Snapshot after Close: %v", err)
	}
	mustDo(t, s.Close())
}

func TestStore_ConcurrentReadersAndWriter(t *testing.T) {
	s := mustNewStore(t)
	const n = 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lastIdx uint64
			lastLen := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				idx, ins, err := s.Instances(NewWatchSet(), testKey)
				if errors.Is(err, model.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if idx < lastIdx || len(ins) < lastLen {
					errs <- errors.New("a read went backwards")
					return
				}
				lastIdx, lastLen = idx, len(ins)
			}
		}()
	}
	for i := range n {
		mustDo(t, s.RegisterInstance(uint64(i+1), testInstance("127.100.1.1", 1000+i)))
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, ins, err := s.Instances(nil, testKey)
	mustDo(t, err)
	if len(ins) != n {
		t.Fatalf("%d instances, want %d", len(ins), n)
	}
}

func TestForEachInstance_GivesClusterSpec(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.UpsertCluster(1, model.Cluster{Namespace: testKey.Namespace, Group: testKey.Group, Service: testKey.Service,
		Name: "web", HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Path: "/health"}}))
	a := testInstance("127.100.0.1", 80)
	a.Cluster = "web"
	mustDo(t, s.RegisterInstance(2, a))
	mustDo(t, s.RegisterInstance(3, testInstance("127.100.0.2", 80)))

	got := map[string]model.CheckType{}
	mustDo(t, s.ForEachInstance(func(in model.Instance, hc model.HealthCheck) bool {
		got[in.Addr()] = hc.Type
		return true
	}))
	want := map[string]model.CheckType{"127.100.0.1:80": model.CheckHTTP, "127.100.0.2:80": model.CheckTCP}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("specs = %v, want %v", got, want)
	}

	calls := 0
	mustDo(t, s.ForEachInstance(func(model.Instance, model.HealthCheck) bool { calls++; return false }))
	if calls != 1 {
		t.Fatalf("fn called %d times after returning false, want 1", calls)
	}
}

func TestCounts_CountsRecords(t *testing.T) {
	s := mustNewStore(t)
	mustDo(t, s.RegisterInstance(1, testInstance("127.100.0.1", 80)))
	mustDo(t, s.RegisterInstance(2, testInstance("127.100.0.2", 80)))
	mustDo(t, s.UpsertService(3, model.Service{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Name: "other"}))
	ns, svcs, ins, err := s.Counts()
	mustDo(t, err)
	if ns != 2 || svcs != 2 || ins != 2 {
		t.Fatalf("Counts = %d, %d, %d; want 2, 2, 2", ns, svcs, ins)
	}
}
