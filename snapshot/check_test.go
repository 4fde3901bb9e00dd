package snapshot

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/store"
)

// mustStateFile returns a real state file as an archive holds it (Snapshot.WriteTo,
// which stops at bbolt's high-water mark, without the zeros bbolt preallocates beyond
// it): namespace "public" with one service of two instances, applied up to index 6.
func mustStateFile(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, ip := range []string{"127.100.0.1", "127.100.0.2"} {
		idx := uint64(5 + i)
		in := model.Instance{Namespace: "public", Group: "DEFAULT_GROUP", Service: "api", IP: ip, Port: 8080,
			Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}
		err := st.Update(func(tx *store.Txn) error {
			if err := tx.RegisterInstance(idx, in); err != nil {
				return err
			}
			return tx.SetAppliedIndex(idx)
		})
		if err != nil {
			t.Fatalf("registering %s: %v", ip, err)
		}
	}
	defer func() { _ = st.Close() }()
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sn.Close() }()
	var b bytes.Buffer
	if _, err := sn.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCheckState checks that a real state file whose meta.json agrees passes, and
// that a file that is not Roster state, or that disagrees with meta.json, rejects
// the archive.
func TestCheckState(t *testing.T) {
	state := mustStateFile(t)
	good := Meta{Index: 6, Term: 2, RosterVersion: "test", Counts: Counts{Namespaces: 1, Services: 1, Instances: 2}}
	tests := []struct {
		name  string
		meta  func(m *Meta)
		state []byte
		want  string // "" when the archive must pass
		is    error
	}{
		{name: "agrees", meta: func(*Meta) {}, state: state},
		{name: "meta index beyond applied", meta: func(m *Meta) { m.Index = 9 }, state: state},
		{name: "counts differ", meta: func(m *Meta) { m.Counts.Instances = 3 }, state: state, want: "holds 1 namespaces, 1 services and 2 instances; meta.json says 1, 1 and 3"},
		{name: "state newer than meta", meta: func(m *Meta) { m.Index = 5 }, state: state, want: "applied the Raft log up to index 6, beyond meta.json's index 5"},
		{name: "not a bbolt file", meta: func(*Meta) {}, state: testState(len(state)), want: "rejected by the state check: ", is: store.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := good
			tc.meta(&meta)
			var buf bytes.Buffer
			if err := Write(&buf, meta, bytes.NewReader(tc.state), int64(len(tc.state))); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			a, err := Read(&buf, ReadOptions{Dir: dir, Check: CheckState})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				a.Close()
				return
			}
			mustFormatError(t, err, "state.db", tc.want)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			mustBeEmpty(t, dir)
		})
	}
}
