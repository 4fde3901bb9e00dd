package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWriteRead_RoundTrip checks that Read returns the Meta and the exact state bytes
// that Write was given, for sizes around the tar block size.
func TestWriteRead_RoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 513, 4096, 100_000, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			state := testState(size)
			archive := mustWrite(t, state)
			dir := t.TempDir()

			a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(a.Meta, wantMeta(int64(size))) {
				t.Errorf("Meta = %+v, want %+v", a.Meta, wantMeta(int64(size)))
			}
			got, err := os.ReadFile(a.StatePath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, state) {
				t.Errorf("extracted state differs: %d bytes, want %d", len(got), len(state))
			}
			if err := a.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			mustBeEmpty(t, dir)

			meta, err := Inspect(bytes.NewReader(archive), ReadOptions{})
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if !reflect.DeepEqual(meta, wantMeta(int64(size))) {
				t.Errorf("Inspect Meta = %+v, want %+v", meta, wantMeta(int64(size)))
			}
		})
	}
}

// TestWrite_StandardLayout checks the archive with the standard library alone: the
// canonical gzip header, the three members in order, and a SHA256SUMS that
// sha256sum -c accepts.
func TestWrite_StandardLayout(t *testing.T) {
	state := testState(10_000)
	archive := mustWrite(t, state)

	wantHeader := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}
	if !bytes.Equal(archive[:10], wantHeader) {
		t.Errorf("gzip header = % x, want % x", archive[:10], wantHeader)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	bodies := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			t.Errorf("%s: type %q, want a regular file", hdr.Name, hdr.Typeflag)
		}
		if !hdr.ModTime.Equal(testMeta().CreatedAt.Truncate(time.Second)) {
			t.Errorf("%s: ModTime %v, want CreatedAt", hdr.Name, hdr.ModTime)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		bodies[hdr.Name] = string(b)
	}
	if want := []string{"meta.json", "state.db", "SHA256SUMS"}; !slices.Equal(names, want) {
		t.Fatalf("members = %q, want %q", names, want)
	}
	if bodies["state.db"] != string(state) {
		t.Error("state.db differs from the state written")
	}
	if got, want := bodies["SHA256SUMS"], sumsOf(bodies["meta.json"], string(state)); got != want {
		t.Errorf("SHA256SUMS = %q, want %q", got, want)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(bodies["meta.json"]), &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"formatVersion": 1.0, "index": 4242.0, "term": 7.0, "rosterVersion": "v0.1.0-test",
		"createdAt": "2025-11-29T16:04:05.123456789Z", "size": 10000.0,
		"counts": map[string]any{"namespaces": 2.0, "services": 5.0, "instances": 17.0},
	}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("meta.json = %v, want %v", fields, want)
	}
}

// TestWrite_FillsMeta checks the fields Write fills itself.
func TestWrite_FillsMeta(t *testing.T) {
	before := time.Now()
	var buf bytes.Buffer
	meta := Meta{Index: 9, Term: 2, CreatedAt: time.Time{}}
	if err := Write(&buf, meta, strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	got, err := Inspect(&buf, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.FormatVersion != FormatVersion || got.Size != 3 || got.Index != 9 || got.Term != 2 {
		t.Errorf("Meta = %+v", got)
	}
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(time.Now().Add(time.Second)) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt = %v, want the current time in UTC", got.CreatedAt)
	}
}

// TestWrite_Deterministic checks that equal inputs give identical archives, so a
// backup can be compared byte for byte.
func TestWrite_Deterministic(t *testing.T) {
	state := testState(50_000)
	if !bytes.Equal(mustWrite(t, state), mustWrite(t, state)) {
		t.Error("two archives of the same input differ")
	}
}

// TestWrite_RejectsBadInput checks that Write refuses inconsistent input instead of
// producing an archive that lies.
func TestWrite_RejectsBadInput(t *testing.T) {
	readErr := errors.New("disk on fire")
	tests := []struct {
		name  string
		meta  func(m *Meta)
		state io.Reader
		size  int64
		want  string
	}{
		{name: "state shorter than size", state: strings.NewReader("abc"), size: 4, want: "state ended after 3 of 4 bytes"},
		{name: "state longer than size", state: strings.NewReader("abcde"), size: 4, want: "more than the 4 bytes announced"},
		{name: "negative size", state: strings.NewReader(""), size: -1, want: "negative state size"},
		{name: "meta size disagrees", meta: func(m *Meta) { m.Size = 5 }, state: strings.NewReader("abcd"), size: 4, want: "meta.Size is 5"},
		{name: "other format version", meta: func(m *Meta) { m.FormatVersion = 2 }, state: strings.NewReader("abcd"), size: 4, want: "cannot write format version 2"},
		{name: "negative count", meta: func(m *Meta) { m.Counts.Services = -1 }, state: strings.NewReader("abcd"), size: 4, want: "counts.services is negative"},
		{name: "state read error", state: io.MultiReader(strings.NewReader("ab"), &failingReader{err: readErr}), size: 4, want: "disk on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := testMeta()
			if tc.meta != nil {
				tc.meta(&meta)
			}
			err := Write(io.Discard, meta, tc.state, tc.size)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write error = %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrInvalidArchive) {
				t.Errorf("a write error must not look like an invalid archive: %v", err)
			}
		})
	}
	err := Write(io.Discard, testMeta(), io.MultiReader(strings.NewReader("ab"), &failingReader{err: readErr}), 4)
	if !errors.Is(err, readErr) {
		t.Errorf("Write error %v does not wrap the source's error", err)
	}
}

// TestWrite_DestinationError checks that an error of w is returned.
func TestWrite_DestinationError(t *testing.T) {
	err := Write(&failingWriter{after: 100}, testMeta(), bytes.NewReader(testState(1<<20)), 1<<20)
	if !errors.Is(err, errWriteFailed) {
		t.Fatalf("Write error = %v, want it to wrap the writer's error", err)
	}
}

// TestWriteSpooled_RoundTrip checks that a state of unknown size is archived whole
// and that the spool file is removed.
func TestWriteSpooled_RoundTrip(t *testing.T) {
	state := testState(300_000)
	spool := t.TempDir()
	var buf bytes.Buffer
	if err := WriteSpooled(&buf, testMeta(), bytes.NewReader(state), spool); err != nil {
		t.Fatalf("WriteSpooled: %v", err)
	}
	mustBeEmpty(t, spool)
	if !bytes.Equal(buf.Bytes(), mustWrite(t, state)) {
		t.Error("WriteSpooled output differs from Write's")
	}
}

// TestWriteSpooled_SourceError checks that a failing source fails the write and
// leaves no spool file.
func TestWriteSpooled_SourceError(t *testing.T) {
	spool := t.TempDir()
	err := WriteSpooled(io.Discard, testMeta(), failingWriterTo{}, spool)
	if !errors.Is(err, errWriteFailed) {
		t.Fatalf("WriteSpooled error = %v, want it to wrap the source's error", err)
	}
	mustBeEmpty(t, spool)
}

var errWriteFailed = errors.New("write failed")

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }

// failingWriter accepts after bytes, then fails.
type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n := w.after
		w.after = 0
		return n, errWriteFailed
	}
	w.after -= len(p)
	return len(p), nil
}

type failingWriterTo struct{}

func (failingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, _ := w.Write([]byte("partial"))
	return int64(n), errWriteFailed
}
