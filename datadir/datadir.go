// Package datadir versions the layout of a node's data directory (the state file, the
// Raft log and stable store, Raft's snapshots, the cluster id). The directory records the
// format it is in (FileName); a binary refuses a directory in a newer format than it
// understands, before it opens or changes anything in it, so that a downgrade past a
// format change fails loudly instead of misreading the files.
//
// Format 1 is the layout of every release so far (v0.1.0 onwards): state.db, raft/raft.db,
// raft/snapshots/, cluster-id. Directories written before the record existed are format 1;
// Stamp records it. A future format change will come with an explicit, offline upgrade
// command and its own number.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Format is the newest data directory format this build reads and the one it writes.
const Format = 1

// FileName is the record of the directory's format, at its top level.
const FileName = "format.json"

// ErrNewerFormat is returned for a data directory written in a format newer than Format.
var ErrNewerFormat = errors.New("data directory is in a newer format than this build reads")

// Record is the content of FileName.
type Record struct {
	// Format is the directory's format.
	Format int `json:"format"`
	// WrittenBy is the version of the build that recorded it, for operators.
	WrittenBy string `json:"writtenBy,omitempty"`
}

// Read returns the directory's record; a directory without one (empty, or written before
// the record existed) is format 1 and found is false.
func Read(dir string) (rec Record, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return Record{Format: 1}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, false, fmt.Errorf("%s: %w", FileName, err)
	}
	if rec.Format < 1 {
		return Record{}, false, fmt.Errorf("%s: format %d is not a valid format", FileName, rec.Format)
	}
	return rec, true, nil
}

// Check refuses a directory this build cannot read: one recorded in a newer format (an
// error wrapping ErrNewerFormat that says which build wrote it) or an unreadable record.
// It changes nothing.
func Check(dir string) error {
	rec, _, err := Read(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if rec.Format > Format {
		by := ""
		if rec.WrittenBy != "" {
			by = " by Roster " + rec.WrittenBy
		}
		return fmt.Errorf("%w: %s is format %d (written%s); this build reads format %d at most: run a release that reads format %d",
			ErrNewerFormat, dir, rec.Format, by, Format, rec.Format)
	}
	return nil
}

// Stamp checks the directory (Check) and, when it has no record yet, creates the
// directory if needed and records Format with version as the writer. A directory already
// recorded is left as it is. The record is written to a temporary file and renamed into
// place, so it is never seen half-written.
func Stamp(dir, version string) error {
	if err := Check(dir); err != nil {
		return err
	}
	if _, found, err := Read(dir); err != nil || found {
		return err
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	b, err := json.Marshal(Record{Format: Format, WrittenBy: strings.TrimSpace(version)})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, FileName+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o600)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(dir, FileName))
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("record the data directory format: %w", werr)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
