package tlsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// outFile is one file to write.
type outFile struct {
	path string
	data []byte
	perm fs.FileMode
}

// refuseExisting fails, naming the first one, when any of paths exists and force is off.
func refuseExisting(force bool, paths ...string) error {
	if force {
		return nil
	}
	for _, p := range paths {
		_, err := os.Lstat(p)
		switch {
		case err == nil:
			return fmt.Errorf("tls: %s already exists; remove it or pass --force to replace it", p)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("tls: %w", err)
		}
	}
	return nil
}

// writeFiles creates dir (0700) when missing and writes every file with exactly its
// mode. Each file appears whole or not at all: it is written to a temporary file in dir
// first, then linked into place (refusing an existing file) or, with force, renamed over
// it. When a later file fails, the files this call created are removed again.
func writeFiles(dir string, force bool, files []outFile) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	var created []string
	defer func() {
		if err != nil {
			for _, p := range created {
				_ = os.Remove(p)
			}
		}
	}()
	for _, f := range files {
		fresh, err := writeFile(dir, f, force)
		if err != nil {
			return err
		}
		if fresh {
			created = append(created, f.path)
		}
	}
	return nil
}

// writeFile writes one file (see writeFiles); fresh reports that it did not exist.
func writeFile(dir string, f outFile, force bool) (fresh bool, err error) {
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("tls: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// CreateTemp makes the file 0600 and the umask may narrow a mode: set it exactly.
	if err := tmp.Chmod(f.perm); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("tls: %w", err)
	}
	if _, err := tmp.Write(f.data); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("tls: write %s: %w", f.path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("tls: write %s: %w", f.path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("tls: write %s: %w", f.path, err)
	}
	_, statErr := os.Lstat(f.path)
	fresh = errors.Is(statErr, fs.ErrNotExist)
	if force {
		if err := os.Rename(tmp.Name(), f.path); err != nil {
			return false, fmt.Errorf("tls: %w", err)
		}
		return fresh, nil
	}
	if err := os.Link(tmp.Name(), f.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, fmt.Errorf("tls: %s already exists; remove it or pass --force to replace it", f.path)
		}
		return false, fmt.Errorf("tls: %w", err)
	}
	return true, nil
}
