package datadir

import (
	"os"
	"path/filepath"
	"testing"
)

// Tighten makes directories 0700 and regular files 0600 under a root, leaves symbolic
// links alone and accepts a root that does not exist.
func TestTighten(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	if err := Tighten(root); err != nil {
		t.Fatalf("a missing root: %v", err)
	}
	sub := filepath.Join(root, "raft", "snapshots", "1-2-3")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "state.bin")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := Tighten(root); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{root, DirMode}, {filepath.Join(root, "raft"), DirMode}, {sub, DirMode}, {file, FileMode}, {outside, 0o644}} {
		info, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != c.want {
			t.Errorf("%s: %v, want %v", c.path, info.Mode().Perm(), c.want)
		}
	}
}
