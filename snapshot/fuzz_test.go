package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzRead checks that Read never panics, reports every failure on in-memory input
// as a *FormatError that names no local path, without leaving files behind, and,
// when it accepts an input, that the input really is a valid archive (checked here
// with the standard library alone) whose numbers are within the format's limits and
// whose state.db expands no more than DefaultMaxExpansion allows.
func FuzzRead(f *testing.F) {
	valid := mustWrite(f, testState(2000))
	meta := mustMetaJSON(f, 5)
	f.Add(valid)
	f.Add(rawArchive{members: members(meta, "state"), stored: true}.bytes(f))
	f.Add(mustWrite(f, nil))
	f.Add(valid[:len(valid)/2])
	f.Add(valid[:len(valid)-1])
	f.Add(append(bytes.Clone(valid), valid...))
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0x10
	f.Add(flipped)
	f.Add(rawArchive{members: append(members(meta, "state"), rawMember{name: "x", body: "y"}), stored: true}.bytes(f))
	f.Add(rawArchive{members: members(meta, "stat"), stored: true}.bytes(f))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255})
	f.Add([]byte{})
	f.Add(bomb(f, 4<<20))
	f.Add(rawArchive{members: members(strings.Replace(meta, `"index": 4242`, `"index": 18446744073709551615`, 1), "state"), stored: true}.bytes(f))

	dir := f.TempDir() // one per fuzzing process, whose inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data), ReadOptions{Dir: dir})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidArchive) {
				t.Fatalf("in-memory input failed with %T %v, want a *FormatError", err, err)
			}
			if strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q names the extraction directory", err)
			}
			mustBeEmpty(t, dir)
			return
		}
		defer a.Close()
		if err := a.Meta.checkBounds(); err != nil {
			t.Fatalf("accepted an archive beyond the limits: %v", err)
		}
		if a.Meta.Index > MaxIndex || a.Meta.Term > MaxTerm || a.Meta.Size > MaxStateSize {
			t.Fatalf("accepted index %d, term %d, size %d", a.Meta.Index, a.Meta.Term, a.Meta.Size)
		}
		if a.Meta.Size > DefaultMaxExpansion*int64(len(data))+expansionAllowance {
			t.Fatalf("accepted a state.db of %d bytes from %d bytes of archive", a.Meta.Size, len(data))
		}

		names, bodies := untar(t, gunzip(t, data))
		if want := []string{"meta.json", "state.db", "SHA256SUMS"}; !slices.Equal(names, want) {
			t.Fatalf("accepted an archive with members %q", names)
		}
		if got, want := bodies[2], sumsOf(bodies[0], bodies[1]); got != want {
			t.Fatalf("accepted an archive whose SHA256SUMS %q does not match its content (%q)", got, want)
		}
		extracted, err := os.ReadFile(a.StatePath)
		if err != nil {
			t.Fatal(err)
		}
		if string(extracted) != bodies[1] || a.Meta.Size != int64(len(extracted)) {
			t.Fatalf("extracted %d bytes, archive holds %d, Meta.Size %d", len(extracted), len(bodies[1]), a.Meta.Size)
		}
		m, err := parseMeta([]byte(bodies[0]))
		if err != nil || m != a.Meta {
			t.Fatalf("returned Meta %+v, meta.json parses to %+v, %v", a.Meta, m, err)
		}
	})
}

// untar returns the names and bodies of the members of a tar stream.
func untar(t *testing.T, b []byte) (names, bodies []string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		bodies = append(bodies, string(body))
	}
}
