// Package storetest opens state files for tests: one helper instead of a copy in every
// package's tests.
package storetest

import (
	"path/filepath"
	"testing"

	"github.com/rosterhq/roster/store"
)

// Open opens a new state file in a temporary directory of t, without fsync, and closes
// it when the test ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	return OpenWith(t, store.Options{NoSync: true})
}

// OpenWith is Open with opts.
func OpenWith(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"), opts)
	if err != nil {
		t.Fatalf("open a state file: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
