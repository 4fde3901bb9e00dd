package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rosterhq/roster/model"
	bolt "go.etcd.io/bbolt"
)

// populate writes a bit of everything, at indexes from..from+n.
func populate(t testing.TB, s *Store, from uint64) uint64 {
	t.Helper()
	idx := from
	next := func() uint64 { idx++; return idx }
	mustDo(t, s.UpsertNamespace(next(), model.Namespace{ID: "dev", Description: "development"}))
	mustDo(t, s.UpsertCluster(next(), model.Cluster{Namespace: "dev", Group: "g1", Service: "orders", Name: "web",
		HealthCheck: model.HealthCheck{Type: model.CheckHTTP, Path: "/health", ExpectedStatus: []int{200}}}))
	for i := range 5 {
		in := testInstance("127.100.0.1", 8000+i)
		if i%2 == 0 {
			in.Cluster = "web"
		}
		mustDo(t, s.RegisterInstance(next(), in))
	}
	mustDo(t, s.UpsertService(next(), model.Service{Namespace: model.DefaultNamespace, Group: model.DefaultGroup, Name: "pay", ProtectThreshold: 0.3}))
	mustDo(t, s.UpsertMember(next(), model.Member{ID: "n1", RaftAddr: "127.0.0.1:7848", HTTPAddr: "127.0.0.1:8848"}))
	mustDo(t, s.Update(func(tx *Txn) error { return tx.SetAppliedIndex(next()) }))
	return idx
}

func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	sn, err := s.Snapshot()
	mustDo(t, err)
	defer func() { _ = sn.Close() }()
	var buf bytes.Buffer
	n, err := sn.WriteTo(&buf)
	mustDo(t, err)
	if n != int64(buf.Len()) || n != sn.Size() {
		t.Fatalf("WriteTo reported %d bytes, wrote %d, Size %d", n, buf.Len(), sn.Size())
	}
	return buf.Bytes()
}

func TestSnapshot_RestoreEqualsSource(t *testing.T) {
	src := mustNewStore(t)
	last := populate(t, src, 0)
	data := snapshotBytes(t, src)

	dst := mustNewStore(t)
	mustDo(t, dst.RegisterInstance(1, testInstance("192.168.0.1", 1)))
	mustDo(t, dst.Restore(bytes.NewReader(data)))
	if got, want := mustDump(t, dst), mustDump(t, src); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	if dst.AppliedIndex() != last {
		t.Fatalf("AppliedIndex = %d, want %d", dst.AppliedIndex(), last)
	}
	// The restored store keeps working.
	mustDo(t, dst.DeregisterInstance(last+1, testInstance("127.100.0.1", 8000).Ref()))
}

func TestSnapshot_IsAPointInTimeView(t *testing.T) {
	src := mustNewStore(t)
	populate(t, src, 0)
	want := mustDump(t, src)
	sn, err := src.Snapshot()
	mustDo(t, err)
	defer func() { _ = sn.Close() }()
	mustDo(t, src.RegisterInstance(100, testInstance("127.109.9.9", 1)))
	mustDo(t, src.Update(func(tx *Txn) error { return tx.SetAppliedIndex(100) }))

	var buf bytes.Buffer
	_, err = sn.WriteTo(&buf)
	mustDo(t, err)
	if sn.AppliedIndex() != want.AppliedIndex {
		t.Fatalf("snapshot AppliedIndex = %d, want %d", sn.AppliedIndex(), want.AppliedIndex)
	}
	dst := mustNewStore(t)
	mustDo(t, dst.Restore(&buf))
	assertUnchanged(t, dst, want)
}

func TestRestore_BadInputIsCorruptAndChangesNothing(t *testing.T) {
	good := mustNewStore(t)
	populate(t, good, 0)
	snap := snapshotBytes(t, good)

	foreignPath := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(foreignPath, 0o600, nil)
	mustDo(t, err)
	mustDo(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("logs")); return err }))
	mustDo(t, db.Close())
	foreign, err := os.ReadFile(foreignPath)
	mustDo(t, err)

	random := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	cases := map[string][]byte{
		"empty":     nil,
		"garbage":   random,
		"text":      []byte(strings.Repeat("not a database ", 1000)),
		"truncated": snap[:len(snap)/2],
		"foreign":   foreign,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustNewStore(t)
			last := populate(t, s, 0)
			before := mustDump(t, s)
			ws := NewWatchSet()
			_, _, _ = s.Namespaces(ws)
			events, cancel := s.Subscribe(1)
			defer cancel()

			err := s.Restore(bytes.NewReader(data))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Restore = %v, want ErrCorrupt", err)
			}
			assertUnchanged(t, s, before)
			if s.IndexFloor() != 0 || s.AppliedIndex() != last {
				t.Fatalf("floor %d applied %d changed", s.IndexFloor(), s.AppliedIndex())
			}
			if !notFired(ws) {
				t.Fatal("watchers woken by a failed restore")
			}
			select {
			case evs := <-events:
				t.Fatalf("events from a failed restore: %v", kinds(evs))
			default:
			}
			entries, err := os.ReadDir(filepath.Dir(s.Path()))
			mustDo(t, err)
			if len(entries) != 1 {
				t.Fatalf("files left beside the state: %v", entries)
			}
			mustDo(t, s.RegisterInstance(last+1, testInstance("127.101.1.1", 1)))
		})
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestRestore_ReadErrorChangesNothing(t *testing.T) {
	s := mustNewStore(t)
	populate(t, s, 0)
	before := mustDump(t, s)
	if err := s.Restore(&failingReader{n: 10000}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Restore = %v", err)
	}
	assertUnchanged(t, s, before)
}

func TestRestore_IndexFloorKeepsIndexesMonotonic(t *testing.T) {
	old := mustNewStore(t)
	populate(t, old, 0) // indexes 1..10
	oldSnap := snapshotBytes(t, old)

	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{NoSync: true})
	mustDo(t, err)
	last := populate(t, s, 100) // indexes 101..110
	svcIdx, _, _ := s.Service(nil, testKey)

	ws := NewWatchSet()
	_, _, _ = s.Service(ws, testKey)
	events, cancel := s.Subscribe(4)
	defer cancel()
	mustDo(t, s.Restore(bytes.NewReader(oldSnap)))

	if !fired(ws) {
		t.Fatal("restore did not wake watchers")
	}
	if evs := recv(t, events); len(evs) != 1 || evs[0].Kind != EventReset {
		t.Fatalf("restore events %v, want one reset", kinds(evs))
	}
	if s.IndexFloor() != last+1 {
		t.Fatalf("floor = %d, want %d", s.IndexFloor(), last+1)
	}
	checkReads := func(s *Store) {
		t.Helper()
		idx, _, err := s.Service(nil, testKey)
		mustDo(t, err)
		if idx <= svcIdx || idx != last+1 {
			t.Fatalf("service index after restore = %d, want %d (> %d)", idx, last+1, svcIdx)
		}
		if idx, _, _ := s.Namespaces(nil); idx != last+1 {
			t.Fatalf("namespace-list index = %d, want %d", idx, last+1)
		}
		if idx, _, _ := s.Members(nil); idx != last+1 {
			t.Fatalf("member index = %d, want %d", idx, last+1)
		}
	}
	checkReads(s)
	mustDo(t, s.Close())

	s2 := mustOpenAt(t, path)
	if s2.IndexFloor() != last+1 {
		t.Fatalf("floor after reopen = %d, want %d", s2.IndexFloor(), last+1)
	}
	checkReads(s2)
	// A write past the floor shows its own index again.
	mustDo(t, s2.RegisterInstance(last+5, testInstance("127.107.7.7", 7)))
	if idx, _, _ := s2.Service(nil, testKey); idx != last+5 {
		t.Fatalf("index after a new write = %d, want %d", idx, last+5)
	}
	// Restoring again raises the floor past everything seen so far, including the floor.
	mustDo(t, s2.Restore(bytes.NewReader(oldSnap)))
	if s2.IndexFloor() != last+2 {
		t.Fatalf("second floor = %d, want %d", s2.IndexFloor(), last+2)
	}
}

func TestRestore_OpenSnapshotOfTheOldStateStaysReadable(t *testing.T) {
	s := mustNewStore(t)
	populate(t, s, 0)
	want := mustDump(t, s)
	sn, err := s.Snapshot()
	mustDo(t, err)

	other := mustNewStore(t)
	mustDo(t, other.RegisterInstance(1, testInstance("172.16.0.1", 1)))
	mustDo(t, s.Restore(bytes.NewReader(snapshotBytes(t, other))))

	var buf bytes.Buffer
	_, err = sn.WriteTo(&buf)
	mustDo(t, err)
	mustDo(t, sn.Close())
	dst := mustNewStore(t)
	mustDo(t, dst.Restore(&buf))
	assertUnchanged(t, dst, want)
}

func TestCheckFile_CountsAndRejects(t *testing.T) {
	s := mustNewStore(t)
	last := populate(t, s, 0)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	mustDo(t, os.WriteFile(good, snapshotBytes(t, s), 0o600))
	counts, applied, err := CheckFile(good)
	mustDo(t, err)
	want := Counts{Namespaces: 2, Services: 2, Clusters: 2, Instances: 5, Members: 1}
	if counts != want || applied != last {
		t.Fatalf("CheckFile = %+v %d, want %+v %d", counts, applied, want, last)
	}

	bad := filepath.Join(dir, "bad.db")
	mustDo(t, os.WriteFile(bad, []byte(strings.Repeat("x", 10000)), 0o600))
	if _, _, err := CheckFile(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v, want ErrCorrupt", err)
	}
	if _, _, err := CheckFile(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing: %v, want ErrNotExist", err)
	}

	// A record stored under the wrong key is caught.
	moved := filepath.Join(dir, "moved.db")
	mustDo(t, os.WriteFile(moved, snapshotBytes(t, s), 0o600))
	db, err := bolt.Open(moved, 0o600, nil)
	mustDo(t, err)
	mustDo(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketNamespaces)
		return b.Put([]byte("elsewhere"), b.Get([]byte("dev")))
	}))
	mustDo(t, db.Close())
	if _, _, err := CheckFile(moved); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("misplaced record: %v, want ErrCorrupt", err)
	}
}

func TestRestore_ConcurrentReadersAndWaitersKeepWorking(t *testing.T) {
	s := mustNewStore(t)
	populate(t, s, 0)
	snap := snapshotBytes(t, s)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				idx, _, err := s.Instances(NewWatchSet(), testKey)
				if err != nil {
					errs <- err
					return
				}
				if idx < last {
					errs <- fmt.Errorf("index went back from %d to %d", last, idx)
					return
				}
				last = idx
			}
		}()
	}
	for range 5 {
		mustDo(t, s.Restore(bytes.NewReader(snap)))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSnapshot_CountsMatchCheckFile(t *testing.T) {
	s := mustNewStore(t)
	populate(t, s, 0)
	sn, err := s.Snapshot()
	mustDo(t, err)
	defer func() { _ = sn.Close() }()
	// A write after the view opened is not counted.
	mustDo(t, s.RegisterInstance(100, testInstance("127.109.9.9", 1)))

	path := filepath.Join(t.TempDir(), "state.db")
	f, err := os.Create(path)
	mustDo(t, err)
	_, err = sn.WriteTo(f)
	mustDo(t, err)
	mustDo(t, f.Close())
	want, _, err := CheckFile(path)
	mustDo(t, err)
	if got := sn.Counts(); got != want {
		t.Fatalf("Counts = %+v, CheckFile of the same view = %+v", got, want)
	}
	if want.Instances != 5 {
		t.Fatalf("view counts %d instances, want 5", want.Instances)
	}
}
