package datadir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of everything in a data directory. The state file, the Raft log and Raft's
// snapshots hold MYSQL health-check passwords, token hashes and every registration:
// only the node's own user may read them.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Tighten gives every directory under root (root included) DirMode and every regular
// file FileMode, where they allow more (or other than) that; symbolic links are left
// alone. A node runs it on its data directory at start, so that files an older release
// (or a library) wrote with wider modes are private from then on, and on each Raft
// snapshot once it is written. A root that does not exist is no error.
func Tighten(root string) error {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		want := FileMode
		switch {
		case d.IsDir():
			want = DirMode
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile (a snapshot reaped)
			}
			return err
		}
		if info.Mode().Perm() == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("datadir: restrict the mode of %s: %w", path, err)
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
