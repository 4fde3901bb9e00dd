package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStamp_RecordsFormatOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := Stamp(dir, "v0.3.0"); err != nil {
		t.Fatal(err)
	}
	rec, found, err := Read(dir)
	if err != nil || !found || rec.Format != Format || rec.WrittenBy != "v0.3.0" {
		t.Fatalf("Read = %+v, %v, %v", rec, found, err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	// A later build leaves the record as it is.
	if err := Stamp(dir, "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := Read(dir); rec.WrittenBy != "v0.3.0" {
		t.Fatalf("record rewritten: %+v", rec)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestRead_DirectoryWithoutRecordIsFormat1(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, found, err := Read(dir)
	if err != nil || found || rec.Format != 1 {
		t.Fatalf("Read = %+v, %v, %v", rec, found, err)
	}
	if err := Check(dir); err != nil {
		t.Fatal(err)
	}
}

func TestCheck_RefusesNewerFormatAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"format":2,"writtenBy":"v0.9.0"}` + "\n")
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Check": Check(dir), "Stamp": Stamp(dir, "v0.3.0")} {
		if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "v0.9.0") || !strings.Contains(err.Error(), "format 2") {
			t.Fatalf("%s = %v, want ErrNewerFormat naming the writer and the format", name, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(body) {
		t.Fatalf("record changed: %q (%v)", got, err)
	}
}

func TestRead_InvalidRecords(t *testing.T) {
	for _, body := range []string{`{`, `{"format":0}`, `{"format":-3}`, `[]`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Check(dir); err == nil {
			t.Errorf("Check accepted record %q", body)
		}
	}
}
