package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRead_RejectsMalformedArchives checks that each kind of bad archive is refused
// with a *FormatError that names the member and the problem, leaving nothing behind.
func TestRead_RejectsMalformedArchives(t *testing.T) {
	const state = "pretend this is a bbolt file"
	meta := mustMetaJSON(t, len(state))
	withMeta := func(m string) []rawMember { return members(m, state) }
	replace := func(old, new string) string {
		if !strings.Contains(meta, old) {
			t.Fatalf("meta.json %s has no %q", meta, old)
		}
		return strings.Replace(meta, old, new, 1)
	}
	valid := members(meta, state)
	extra := rawMember{name: "notes.txt", body: "hello"}

	tests := []struct {
		name   string
		input  []byte
		member string
		want   []string
	}{
		// The container.
		{name: "empty input", input: nil, want: []string{"empty input"}},
		{name: "not gzip", input: []byte("meta.json\x00\x00\x00 plain tar or anything"), want: []string{"not a gzip stream", "6d65"}},
		{name: "plain tar", input: func() []byte {
			b := rawArchive{members: valid}.bytes(t)
			zr, _ := gzip.NewReader(bytes.NewReader(b))
			p, _ := io.ReadAll(zr)
			return p
		}(), want: []string{"not a gzip stream"}},
		{name: "gzip header cut", input: []byte{0x1f, 0x8b, 8, 0}, want: []string{"truncated", "gzip header"}},
		{name: "gzip header names a file", input: rawArchive{members: valid, header: gzip.Header{Name: "backup.tar"}}.bytes(t), want: []string{"gzip header", "flags byte is 0x08", "not written by Roster"}},
		{name: "gzip header has a time", input: rawArchive{members: valid, header: gzip.Header{ModTime: time.Unix(1700000000, 0)}}.bytes(t), want: []string{"gzip header", "modification time"}},
		{name: "gzip best speed", input: rawArchive{members: valid, level: gzip.BestSpeed}.bytes(t), want: []string{"gzip header", "extra flags byte is 0x04"}},
		{name: "gzip header from another OS", input: func() []byte { b := rawArchive{members: valid}.bytes(t); b[9] = 3; return b }(), want: []string{"gzip header", "operating system byte is 3"}},
		{name: "trailing garbage after gzip", input: rawArchive{members: valid, after: "garbage"}.bytes(t), want: []string{"unexpected data after the end of the gzip stream", "676172"}},
		{name: "trailing zero byte after gzip", input: rawArchive{members: valid, after: "\x00"}.bytes(t), want: []string{"after the end of the gzip stream"}},
		{name: "second gzip member", input: append(rawArchive{members: valid}.bytes(t), rawArchive{members: valid}.bytes(t)...), want: []string{"a second gzip stream follows"}},
		{name: "no tar end marker", input: rawArchive{members: valid, noEnd: true}.bytes(t), want: []string{"end-of-archive marker"}},
		{name: "data after tar end marker", input: rawArchive{members: valid, afterTar: "junk"}.bytes(t), want: []string{"inside the gzip stream after the tar end-of-archive marker"}},
		{name: "zero padding after tar end marker", input: rawArchive{members: valid, afterTar: strings.Repeat("\x00", 9216)}.bytes(t), want: []string{"after the tar end-of-archive marker"}},
		{name: "gzip of something else", input: rawArchive{}.bytes(t), member: "meta.json", want: []string{"missing", "tar archive ends before it"}},

		// Members: names, order, types.
		{name: "extra member at the end", input: rawArchive{members: append(valid, extra)}.bytes(t), member: "notes.txt", want: []string{"unexpected member", "meta.json, state.db and SHA256SUMS"}},
		{name: "extra member in the middle", input: rawArchive{members: []rawMember{valid[0], extra, valid[1], valid[2]}}.bytes(t), member: "notes.txt", want: []string{"unexpected member"}},
		{name: "path traversal", input: rawArchive{members: []rawMember{valid[0], {name: "../state.db", body: state}, valid[2]}}.bytes(t), member: "../state.db", want: []string{"unexpected member"}},
		{name: "dot slash name", input: rawArchive{members: []rawMember{{name: "./meta.json", body: meta}, valid[1], valid[2]}}.bytes(t), member: "./meta.json", want: []string{"unexpected member"}},
		{name: "missing meta.json", input: rawArchive{members: valid[1:]}.bytes(t), member: "meta.json", want: []string{"missing or out of order", "found state.db"}},
		{name: "missing state.db", input: rawArchive{members: []rawMember{valid[0], valid[2]}}.bytes(t), member: "state.db", want: []string{"missing or out of order", "found SHA256SUMS"}},
		{name: "missing SHA256SUMS", input: rawArchive{members: valid[:2]}.bytes(t), member: "SHA256SUMS", want: []string{"missing", "ends before it"}},
		{name: "reordered state first", input: rawArchive{members: []rawMember{valid[1], valid[0], valid[2]}}.bytes(t), member: "meta.json", want: []string{"missing or out of order"}},
		{name: "reordered sums before state", input: rawArchive{members: []rawMember{valid[0], valid[2], valid[1]}}.bytes(t), member: "state.db", want: []string{"missing or out of order"}},
		{name: "duplicate meta.json", input: rawArchive{members: []rawMember{valid[0], valid[0], valid[1], valid[2]}}.bytes(t), member: "meta.json", want: []string{"duplicate member"}},
		{name: "duplicate SHA256SUMS", input: rawArchive{members: append(valid, valid[2])}.bytes(t), member: "SHA256SUMS", want: []string{"duplicate member"}},
		{name: "duplicate state.db at the end", input: rawArchive{members: append(valid, valid[1])}.bytes(t), member: "state.db", want: []string{"duplicate member"}},
		{name: "state.db is a symlink", input: rawArchive{members: []rawMember{valid[0], {name: stateName, typeflag: tar.TypeSymlink}, valid[2]}}.bytes(t), member: "state.db", want: []string{"not a regular file"}},
		{name: "meta.json is a directory", input: rawArchive{members: []rawMember{{name: metaName, typeflag: tar.TypeDir}, valid[1], valid[2]}}.bytes(t), member: "meta.json", want: []string{"not a regular file"}},

		// meta.json.
		{name: "format version 2", input: rawArchive{members: withMeta(replace(`"formatVersion": 1`, `"formatVersion": 2, "newField": true`))}.bytes(t), member: "meta.json", want: []string{"format version 2 is not supported", "reads version 1 only", "newer Roster"}},
		{name: "format version 0", input: rawArchive{members: withMeta(replace(`"formatVersion": 1`, `"formatVersion": 0`))}.bytes(t), member: "meta.json", want: []string{"format version 0 is not supported", "reads version 1 only"}},
		{name: "format version a string", input: rawArchive{members: withMeta(replace(`"formatVersion": 1`, `"formatVersion": "1"`))}.bytes(t), member: "meta.json", want: []string{`"formatVersion" is not an integer`}},
		{name: "unknown field", input: rawArchive{members: withMeta(replace(`"term": 7,`, `"term": 7, "leader": "n1",`))}.bytes(t), member: "meta.json", want: []string{`unknown field "leader"`}},
		{name: "unknown count", input: rawArchive{members: withMeta(replace(`"instances": 17`, `"instances": 17, "clusters": 3`))}.bytes(t), member: "meta.json", want: []string{`unknown field "counts.clusters"`}},
		{name: "field in other case", input: rawArchive{members: withMeta(replace(`"index"`, `"Index"`))}.bytes(t), member: "meta.json", want: []string{`unknown field "Index"`}},
		{name: "missing field", input: rawArchive{members: withMeta(replace(`"term": 7,`, ``))}.bytes(t), member: "meta.json", want: []string{`missing field "term"`}},
		{name: "missing count", input: rawArchive{members: withMeta(replace(`"services": 5,`, ``))}.bytes(t), member: "meta.json", want: []string{`missing field "counts.services"`}},
		{name: "missing format version", input: rawArchive{members: withMeta(replace(`"formatVersion": 1,`, ``))}.bytes(t), member: "meta.json", want: []string{`missing field "formatVersion"`}},
		{name: "duplicate field", input: rawArchive{members: withMeta(replace(`"term": 7,`, `"term": 7, "term": 8,`))}.bytes(t), member: "meta.json", want: []string{`duplicate field "term"`}},
		{name: "null field", input: rawArchive{members: withMeta(replace(`"rosterVersion": "v0.1.0-test"`, `"rosterVersion": null`))}.bytes(t), member: "meta.json", want: []string{`field "rosterVersion" is null`}},
		{name: "wrong type", input: rawArchive{members: withMeta(replace(`"index": 4242`, `"index": -1`))}.bytes(t), member: "meta.json", want: []string{`field "index"`, "number -1"}},
		{name: "bad time", input: rawArchive{members: withMeta(replace(`"2025-11-29T16:04:05.123456789Z"`, `"yesterday"`))}.bytes(t), member: "meta.json", want: []string{`field "createdAt"`}},
		{name: "negative count", input: rawArchive{members: withMeta(replace(`"services": 5`, `"services": -5`))}.bytes(t), member: "meta.json", want: []string{"counts.services is negative"}},
		{name: "counts not an object", input: rawArchive{members: withMeta(meta[:strings.Index(meta, `"counts"`)] + `"counts": [1, 2, 3]}`)}.bytes(t), member: "meta.json", want: []string{`field "counts": not a JSON object`}},
		{name: "not JSON", input: rawArchive{members: withMeta("formatVersion=1\n")}.bytes(t), member: "meta.json", want: []string{"invalid JSON"}},
		{name: "JSON array", input: rawArchive{members: withMeta("[1]")}.bytes(t), member: "meta.json", want: []string{"not a JSON object"}},
		{name: "data after the object", input: rawArchive{members: withMeta(meta + "{}")}.bytes(t), member: "meta.json", want: []string{"unexpected data after the JSON object"}},
		{name: "meta.json too large", input: rawArchive{members: withMeta(meta + strings.Repeat(" ", maxMetaSize))}.bytes(t), member: "meta.json", want: []string{"more than the 65536 allowed"}},

		// Sizes and checksums.
		{name: "size larger than state.db", input: rawArchive{members: withMeta(replace(`"size": 28`, `"size": 29`))}.bytes(t), member: "state.db", want: []string{"size mismatch: the member is 28 bytes, meta.json says 29"}},
		{name: "size smaller than state.db", input: rawArchive{members: withMeta(replace(`"size": 28`, `"size": 0`))}.bytes(t), member: "state.db", want: []string{"size mismatch: the member is 28 bytes, meta.json says 0"}},
		{name: "state.db checksum mismatch", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: sumsOf(meta, "something else")}}}.bytes(t), member: "state.db", want: []string{"checksum mismatch", "SHA256SUMS lists"}},
		{name: "meta.json checksum mismatch", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: sumsOf(meta+" ", state)}}}.bytes(t), member: "meta.json", want: []string{"checksum mismatch"}},
		{name: "sums list another file", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: sumsOf(meta, state) + fmt.Sprintf("%064x  notes.txt\n", 0)}}}.bytes(t), member: "SHA256SUMS", want: []string{"line 3 lists unexpected file \"notes.txt\""}},
		{name: "sums miss state.db", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.SplitAfter(sumsOf(meta, state), "\n")[0]}}}.bytes(t), member: "SHA256SUMS", want: []string{"does not list state.db"}},
		{name: "sums list meta.json twice", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.Repeat(strings.SplitAfter(sumsOf(meta, state), "\n")[0], 2)}}}.bytes(t), member: "SHA256SUMS", want: []string{"lists meta.json twice"}},
		{name: "sums binary mode", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.ReplaceAll(sumsOf(meta, state), "  ", " *")}}}.bytes(t), member: "SHA256SUMS", want: []string{"line 1 is not"}},
		{name: "sums uppercase", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.ToUpper(sumsOf(meta, state)[:64]) + sumsOf(meta, state)[64:]}}}.bytes(t), member: "SHA256SUMS", want: []string{"line 1 is not", "lowercase hex"}},
		{name: "sums without final newline", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.TrimSuffix(sumsOf(meta, state), "\n")}}}.bytes(t), member: "SHA256SUMS", want: []string{"does not end with a newline"}},
		{name: "sums CRLF", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.ReplaceAll(sumsOf(meta, state), "\n", "\r\n")}}}.bytes(t), member: "SHA256SUMS", want: []string{"unexpected file \"meta.json\\r\""}},
		{name: "sums empty", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName}}}.bytes(t), member: "SHA256SUMS", want: []string{"is empty"}},
		{name: "sums too large", input: rawArchive{members: []rawMember{valid[0], valid[1], {name: sumsName, body: strings.Repeat("x", maxSumsSize+1)}}}.bytes(t), member: "SHA256SUMS", want: []string{"more than the 4096 allowed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a, err := Read(bytes.NewReader(tc.input), ReadOptions{Dir: dir})
			if err == nil {
				a.Close()
				t.Fatal("Read accepted the archive")
			}
			t.Log(err)
			mustFormatError(t, err, tc.member, tc.want...)
			mustBeEmpty(t, dir)
			_, err = Inspect(bytes.NewReader(tc.input), ReadOptions{})
			mustFormatError(t, err, tc.member, tc.want...)
		})
	}
}

// TestRead_ReportsGzipCorruptionFirst checks that damage the gzip checksum exposes is
// reported as such, with the symptom it caused in the content, rather than as a
// problem of meta.json alone.
func TestRead_ReportsGzipCorruptionFirst(t *testing.T) {
	const state = "state"
	meta := mustMetaJSON(t, len(state))
	// Stored (uncompressed) deflate blocks put meta.json verbatim into the stream.
	archive := rawArchive{members: members(meta, state), stored: true}.bytes(t)
	i := bytes.Index(archive, []byte(`"formatVersion"`))
	if i < 0 {
		t.Fatal("meta.json not found in a stored gzip stream")
	}
	archive[i+1] = 'F' // "FormatVersion": an unknown field, and a gzip checksum mismatch

	_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: t.TempDir()})
	fe := mustFormatError(t, err, "", "gzip checksum mismatch", `first seen as: meta.json: unknown field "FormatVersion"`)
	if !errors.Is(fe, gzip.ErrChecksum) {
		t.Errorf("error %v does not wrap gzip.ErrChecksum", err)
	}
}

// TestRead_SourceErrorIsNotAFormatError checks that a failing reader (a dropped
// upload, a disk error) is reported as itself, not as a bad archive.
func TestRead_SourceErrorIsNotAFormatError(t *testing.T) {
	archive := mustWrite(t, testState(200_000))
	boom := errors.New("connection reset")
	for _, cut := range []int{0, 5, 10, 100, len(archive) / 2, len(archive) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			r := io.MultiReader(bytes.NewReader(archive[:cut]), &failingReader{err: boom})
			_, err := Read(r, ReadOptions{Dir: dir})
			if !errors.Is(err, boom) {
				t.Fatalf("Read error = %v, want it to wrap the source error", err)
			}
			if errors.Is(err, ErrInvalidArchive) {
				t.Errorf("a source error must not match ErrInvalidArchive: %v", err)
			}
			mustBeEmpty(t, dir)
		})
	}
}

// TestRead_Check checks that the state check runs on the complete extracted file
// with the archive's Meta, and that its error rejects the archive.
func TestRead_Check(t *testing.T) {
	state := testState(70_000)
	archive := mustWrite(t, state)

	var calls int
	check := func(path string, meta Meta) error {
		calls++
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, state) {
			t.Error("Check saw a state.db that differs from the archived one")
		}
		if meta != wantMeta(int64(len(state))) {
			t.Errorf("Check got Meta %+v", meta)
		}
		return nil
	}
	dir := t.TempDir()
	a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, Check: check})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("Check called %d times, want 1", calls)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	errSchema := errors.New("no roster schema bucket")
	reject := func(path string, _ Meta) error { return fmt.Errorf("%s: %w", path, errSchema) }
	_, err = Read(bytes.NewReader(archive), ReadOptions{Dir: dir, Check: reject})
	fe := mustFormatError(t, err, "state.db", "rejected by the state check: no roster schema bucket")
	if strings.Contains(err.Error(), dir) {
		t.Errorf("error %q shows the temporary path", err)
	}
	if !errors.Is(fe, errSchema) {
		t.Errorf("error %v does not wrap the check's error", err)
	}
	mustBeEmpty(t, dir)

	_, err = Inspect(bytes.NewReader(archive), ReadOptions{Dir: dir, Check: reject})
	mustFormatError(t, err, "state.db", "rejected by the state check")
	mustBeEmpty(t, dir)

	// A bad archive never reaches the check.
	bad := append(bytes.Clone(archive), 0)
	_, err = Read(bytes.NewReader(bad), ReadOptions{Dir: dir, Check: func(string, Meta) error {
		t.Error("Check called for an archive that failed the format checks")
		return nil
	}})
	mustFormatError(t, err, "", "after the end of the gzip stream")
}

// TestRead_MaxStateSize checks that an oversized state.db is refused before it is
// extracted.
func TestRead_MaxStateSize(t *testing.T) {
	archive := mustWrite(t, testState(10_000))
	dir := t.TempDir()
	_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MaxStateSize: 9_999})
	mustFormatError(t, err, "state.db", "is 10000 bytes, more than the limit of 9999")
	mustBeEmpty(t, dir)
	a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MaxStateSize: 10_000})
	if err != nil {
		t.Fatalf("Read at the limit: %v", err)
	}
	a.Close()
}

// TestInspect_NeedsNoDiskWithoutCheck checks that Inspect does not extract state.db
// unless a check needs the file: a missing Dir is then no problem.
func TestInspect_NeedsNoDiskWithoutCheck(t *testing.T) {
	archive := mustWrite(t, testState(10_000))
	missing := filepath.Join(t.TempDir(), "does-not-exist")
	if _, err := Inspect(bytes.NewReader(archive), ReadOptions{Dir: missing}); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	_, err := Inspect(bytes.NewReader(archive), ReadOptions{Dir: missing, Check: func(string, Meta) error { return nil }})
	if err == nil || errors.Is(err, ErrInvalidArchive) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Inspect with a check into a missing dir: error = %v, want a local file error", err)
	}
}

// TestArchive_Close checks that Close removes the extracted file, may be called
// twice, and tolerates a file the caller moved away.
func TestArchive_Close(t *testing.T) {
	archive := mustWrite(t, testState(1000))
	dir := t.TempDir()
	a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(a.StatePath) != dir {
		t.Errorf("StatePath %s is not in %s", a.StatePath, dir)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustBeEmpty(t, dir)

	b, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(b.StatePath, filepath.Join(t.TempDir(), "state.db")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close after the file was moved: %v", err)
	}
}

// TestFormatError_Error checks the message format and what the error matches.
func TestFormatError_Error(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		err  *FormatError
		want string
	}{
		{&FormatError{Member: "state.db", Reason: "checksum mismatch"}, "invalid snapshot archive: state.db: checksum mismatch"},
		{&FormatError{Reason: "not a gzip stream"}, "invalid snapshot archive: not a gzip stream"},
		{&FormatError{Member: "state.db", Reason: "rejected", Err: cause}, "invalid snapshot archive: state.db: rejected"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		wrapped := fmt.Errorf("restore: %w", tc.err)
		if !errors.Is(wrapped, ErrInvalidArchive) {
			t.Errorf("%v does not match ErrInvalidArchive", wrapped)
		}
		if errors.Is(wrapped, cause) != (tc.err.Err != nil) {
			t.Errorf("%v: errors.Is(cause) = %v", wrapped, !(tc.err.Err != nil))
		}
	}
}
