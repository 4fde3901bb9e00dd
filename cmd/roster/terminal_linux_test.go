package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIsTerminal checks that a pseudo-terminal is recognised and that a regular file,
// a pipe and /dev/null are not.
func TestIsTerminal(t *testing.T) {
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("isTerminal(/dev/ptmx) = false, want true")
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, f := range []*os.File{file, r, w, null} {
		if isTerminal(f) {
			t.Errorf("isTerminal(%s) = true, want false", f.Name())
		}
	}
}
