package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rosterhq/roster/internal/diskstat"
)

// metaWithField returns meta.json for testMeta and a state of size bytes, with the
// value of one field ("counts.x" for a count) replaced by raw JSON.
func metaWithField(t *testing.T, size int, field, raw string) string {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustMetaJSON(t, size)), &obj); err != nil {
		t.Fatal(err)
	}
	if count, ok := strings.CutPrefix(field, "counts."); ok {
		var counts map[string]json.RawMessage
		if err := json.Unmarshal(obj["counts"], &counts); err != nil {
			t.Fatal(err)
		}
		counts[count] = json.RawMessage(raw)
		obj["counts"], _ = json.Marshal(counts)
	} else {
		obj[field] = json.RawMessage(raw)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRead_RefusesNumbersBeyondLimits checks that every number of meta.json is
// bounded: a value beyond its limit (an index near 2^64 above all, which a restore
// would turn into the index of a Raft snapshot) is refused as a format error naming
// the field, before anything is extracted, and the limit itself is accepted. Inspect,
// which `roster snapshot inspect` runs, refuses the same archives.
func TestRead_RefusesNumbersBeyondLimits(t *testing.T) {
	const state = "pretend this is a bbolt file"
	refused := []struct {
		field, raw, want string
	}{
		{"index", "18446744073709551615", `field "index" is 18446744073709551615, above the limit of 9007199254740991`},
		{"index", "18446744073709551614", `field "index" is 18446744073709551614, above the limit`},
		{"index", "9223372036854775808", `field "index" is 9223372036854775808, above the limit`},
		{"index", "9007199254740992", `field "index" is 9007199254740992, above the limit`},
		{"term", "18446744073709551615", `field "term" is 18446744073709551615, above the limit of 9007199254740991`},
		{"size", "1099511627777", `field "size" is 1099511627777, above the limit of 1099511627776`},
		{"size", "9223372036854775807", `field "size" is 9223372036854775807, above the limit`},
		{"counts.namespaces", "2147483648", `field "counts.namespaces" is 2147483648, above the limit of 2147483647`},
		{"counts.services", "9223372036854775807", `field "counts.services" is 9223372036854775807, above the limit`},
		{"counts.instances", "2147483648", `field "counts.instances" is 2147483648, above the limit`},
		{"createdAt", `"1969-12-31T23:59:59Z"`, `field "createdAt" is 1969-12-31T23:59:59Z, outside the range`},
		{"createdAt", `"2262-01-01T00:00:00Z"`, `field "createdAt" is 2262-01-01T00:00:00Z, outside the range`},
		{"createdAt", `"9999-12-31T23:59:59Z"`, `field "createdAt" is 9999-12-31T23:59:59Z, outside the range`},
		{"createdAt", `"0001-01-01T00:00:00Z"`, `field "createdAt" is 0001-01-01T00:00:00Z, outside the range`},
		{"rosterVersion", `"` + strings.Repeat("v", MaxRosterVersionLen+1) + `"`, `field "rosterVersion" is 129 bytes long, more than the limit of 128`},
		{"rosterVersion", `"v1\u001b[2J"`, `field "rosterVersion" holds non-printable characters`},
	}
	for _, tc := range refused {
		t.Run(tc.field+"="+clip(tc.raw, 24), func(t *testing.T) {
			archive := rawArchive{members: members(metaWithField(t, len(state), tc.field, tc.raw), state)}.bytes(t)
			dir := t.TempDir()
			_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, Check: func(string, Meta) error {
				t.Error("the state check ran for an archive with a bad meta.json")
				return nil
			}})
			mustFormatError(t, err, "meta.json", tc.want)
			mustBeEmpty(t, dir)
			_, err = Inspect(bytes.NewReader(archive), ReadOptions{})
			mustFormatError(t, err, "meta.json", tc.want)
		})
	}

	accepted := []struct{ field, raw string }{
		{"index", "9007199254740991"},
		{"term", "9007199254740991"},
		{"counts.instances", "2147483647"},
		{"createdAt", `"1970-01-01T00:00:00Z"`},
		{"createdAt", `"2261-12-31T23:59:59.999999999Z"`},
		{"rosterVersion", `"` + strings.Repeat("v", MaxRosterVersionLen) + `"`},
		{"rosterVersion", `"v1.2.3-rc.1+dirty (devel) é"`},
	}
	for _, tc := range accepted {
		archive := rawArchive{members: members(metaWithField(t, len(state), tc.field, tc.raw), state)}.bytes(t)
		if _, err := Inspect(bytes.NewReader(archive), ReadOptions{}); err != nil {
			t.Errorf("%s = %s, at the limit: %v", tc.field, tc.raw, err)
		}
	}
}

// TestWrite_RefusesNumbersBeyondLimits checks that Write does not produce an archive
// Read would refuse.
func TestWrite_RefusesNumbersBeyondLimits(t *testing.T) {
	for _, m := range []func(*Meta){
		func(m *Meta) { m.Index = MaxIndex + 1 },
		func(m *Meta) { m.Term = 1 << 63 },
		func(m *Meta) { m.Counts.Services = MaxCount + 1 },
		func(m *Meta) { m.RosterVersion = "\x00" },
	} {
		meta := testMeta()
		m(&meta)
		var buf bytes.Buffer
		if err := Write(&buf, meta, strings.NewReader("x"), 1); err == nil || !strings.Contains(err.Error(), "above the limit") && !strings.Contains(err.Error(), "non-printable") {
			t.Errorf("Write of %+v: %v, want a refusal", meta, err)
		}
	}
}

// bomb returns an archive whose state.db is size zero bytes: it compresses about 1,000
// times, the ratio of a gzip bomb.
func bomb(t testing.TB, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, testMeta(), io.LimitReader(zeros{}, size), size); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// stubFreeSpace replaces freeSpace for the test with fn, on a file system of 1 PiB.
func stubFreeSpace(t *testing.T, fn func(dir string) (int64, error)) {
	t.Helper()
	stubDisk(t, 1<<50, fn)
}

// stubDisk replaces freeSpace for the test with fn, on a file system of total bytes.
func stubDisk(t *testing.T, total int64, fn func(dir string) (int64, error)) {
	t.Helper()
	old := freeSpace
	freeSpace = func(dir string) (diskstat.Usage, error) {
		free, err := fn(dir)
		return diskstat.Usage{Free: uint64(free), Total: uint64(total)}, err
	}
	t.Cleanup(func() { freeSpace = old })
}

// dirBytes returns the total size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
		return 0
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

// TestRead_GzipBombIsCutOffEarly checks that a small archive cannot make Read write a
// large file. A 64 MiB state of zeros compresses into 64 KiB; streamed (its size
// unknown), it is refused as soon as what was written outgrows 256 times what was
// read, after a few MiB; with its size known, before anything is written.
func TestRead_GzipBombIsCutOffEarly(t *testing.T) {
	const size = 64 << 20
	archive := bomb(t, size)
	t.Logf("bomb: %d bytes expanding to %d (%.0f times)", len(archive), size, float64(size)/float64(len(archive)))

	// The size on disk is sampled before every write (the space check runs then).
	dir := t.TempDir()
	var mu sync.Mutex
	var peak int64
	stubFreeSpace(t, func(string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		peak = max(peak, dirBytes(t, dir))
		return 1 << 50, nil
	})
	_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 1})
	mustFormatError(t, err, "state.db", "is 67108864 bytes and expands more than 256 times")
	mustBeEmpty(t, dir)
	// The first 32 KiB read from the archive allow 256 times as much plus 1 MiB: 9 MiB.
	t.Logf("streamed: refused with %d bytes on disk", peak)
	if peak == 0 || peak > 10<<20 {
		t.Errorf("%d bytes were on disk before the bomb was refused, want at most 10 MiB", peak)
	}

	peak = 0
	_, err = Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 1, ArchiveSize: int64(len(archive))})
	mustFormatError(t, err, "state.db", "is 67108864 bytes, more than 256 times the")
	if peak != 0 {
		t.Errorf("%d bytes written for a bomb whose size was known", peak)
	}
	mustBeEmpty(t, dir)
	// Inspect refuses it too, though it would write nothing.
	_, err = Inspect(bytes.NewReader(archive), ReadOptions{})
	mustFormatError(t, err, "state.db", "expands more than 256 times")

	// A caller that knows better may allow more, or lift the bound.
	for _, ratio := range []int64{2000, -1} {
		a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MaxExpansion: ratio})
		if err != nil {
			t.Fatalf("MaxExpansion %d: %v", ratio, err)
		}
		_ = a.Close()
	}
}

// TestRead_ExpansionAllowsRealStates checks that the expansion bound leaves alone
// archives of real states, the most compressible of which (an empty one) expands 34
// times, and tiny ones, covered by the 1 MiB allowance.
func TestRead_ExpansionAllowsRealStates(t *testing.T) {
	for _, state := range [][]byte{nil, make([]byte, 100), make([]byte, 900<<10), testState(4 << 20)} {
		archive := mustWrite(t, state)
		a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: t.TempDir(), ArchiveSize: int64(len(archive))})
		if err != nil {
			t.Fatalf("state of %d bytes in an archive of %d: %v", len(state), len(archive), err)
		}
		_ = a.Close()
	}
}

// TestRead_MinFree checks the disk space checks: an archive whose state.db does not
// fit beyond the reserve is refused before anything is written; one that stops fitting
// while it is written (another writer took the space) is refused then, and nothing is
// left behind. The refusal matches ErrNoSpace, is not a format error, and names no
// path.
func TestRead_MinFree(t *testing.T) {
	archive := mustWrite(t, testState(4<<20))
	dir := t.TempDir()

	calls := 0
	stubFreeSpace(t, func(string) (int64, error) {
		calls++
		return 10 << 20, nil
	})
	_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 7 << 20})
	mustNoSpace(t, err, dir, "4194304 bytes are needed, and the file system has 10485760 bytes free of which 7340032 are kept in reserve")
	if calls != 1 {
		t.Errorf("free space checked %d times, want once, before extracting", calls)
	}
	mustBeEmpty(t, dir)

	// Room at first; then the free space shrinks by 1 MiB with every write of ours.
	free := int64(20 << 20)
	stubFreeSpace(t, func(string) (int64, error) {
		free -= 1 << 20
		return free, nil
	})
	_, err = Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 14 << 20})
	mustNoSpace(t, err, dir, "bytes are needed")
	mustBeEmpty(t, dir)

	// A small disk keeps at most an eighth of itself in reserve: 1 GiB with 200 MiB
	// free takes a 4 MiB state despite a reserve of 512 MiB, and keeps 128 MiB.
	stubDisk(t, 1<<30, func(string) (int64, error) { return 200 << 20, nil })
	a, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: DefaultMinFree})
	if err != nil {
		t.Fatalf("a 4 MiB state on a 1 GiB disk with 200 MiB free: %v", err)
	}
	_ = a.Close()
	stubDisk(t, 1<<30, func(string) (int64, error) { return 130 << 20, nil })
	_, err = Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: DefaultMinFree})
	mustNoSpace(t, err, dir, "4194304 bytes are needed, and the file system has 136314880 bytes free of which 134217728 are kept in reserve")

	// The real statfs: no disk has an exabyte to spare.
	freeSpace = diskstat.Of
	if _, err := diskstat.Of(dir); errors.Is(err, diskstat.ErrUnsupported) {
		t.Skip("free space cannot be measured on this platform")
	}
	if err := CheckSpace(dir, 1<<60, 1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("an exabyte fits on the test's disk: %v", err)
	}
	a, err = Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 1})
	if err != nil {
		t.Fatalf("Read with a reserve of 1 byte: %v", err)
	}
	_ = a.Close()
}

func mustNoSpace(t *testing.T, err error, dir, want string) {
	t.Helper()
	if !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrInvalidArchive) {
		t.Fatalf("error %v, want one matching ErrNoSpace only", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if strings.Contains(err.Error(), dir) {
		t.Errorf("error %q names the directory %s", err, dir)
	}
}

// TestRead_LocalErrorsNameNoPath checks that errors of the local disk say what failed
// without naming the server's files: a directory that is gone fails the space check or
// the creation of the temporary file with a message free of its path, while
// errors.Is still sees the cause.
func TestRead_LocalErrorsNameNoPath(t *testing.T) {
	archive := mustWrite(t, testState(10_000))
	dir := filepath.Join(t.TempDir(), "var-lib-roster-snapshot-tmp")
	for _, minFree := range []int64{0, 1} {
		_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: minFree})
		if err == nil || !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrInvalidArchive) {
			t.Fatalf("MinFree %d: error %v, want a local error matching os.ErrNotExist", minFree, err)
		}
		if strings.Contains(err.Error(), "var-lib-roster") || strings.Contains(err.Error(), os.TempDir()) {
			t.Errorf("MinFree %d: error %q names a path", minFree, err)
		}
		if !strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("MinFree %d: error %q does not say what failed", minFree, err)
		}
	}
	// A file where the directory should be: statfs works, creating the file fails.
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Read(bytes.NewReader(archive), ReadOptions{Dir: dir, MinFree: 1})
	if err == nil || errors.Is(err, ErrInvalidArchive) || strings.Contains(err.Error(), "var-lib-roster") ||
		!strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Dir is a file: error %v, want a local error naming no path", err)
	}
	// A full disk reads as ErrNoSpace, whichever way it shows.
	full := localError("extracting state.db", &os.PathError{Op: "write", Path: "/var/lib/roster/x", Err: syscall.ENOSPC})
	if !errors.Is(full, ErrNoSpace) || strings.Contains(full.Error(), "/var/lib") {
		t.Errorf("ENOSPC wrapped as %q (ErrNoSpace: %v)", full, errors.Is(full, ErrNoSpace))
	}
}

// The gzip layer must not be confused with the limits: a stored (uncompressed) archive
// expands less than once and passes whatever its size.
func TestRead_StoredArchivePassesExpansion(t *testing.T) {
	meta := mustMetaJSON(t, 2<<20)
	state := string(make([]byte, 2<<20))
	archive := rawArchive{members: members(meta, state), stored: true}.bytes(t)
	if _, err := Inspect(bytes.NewReader(archive), ReadOptions{ArchiveSize: int64(len(archive))}); err != nil {
		t.Fatal(err)
	}
}
