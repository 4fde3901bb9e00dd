package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// testMeta is the Meta the tests write; Write fills FormatVersion and Size.
func testMeta() Meta {
	return Meta{
		Index:         4242,
		Term:          7,
		RosterVersion: "v0.1.0-test",
		CreatedAt:     time.Date(2025, 11, 29, 16, 4, 5, 123456789, time.UTC),
		Counts:        Counts{Namespaces: 2, Services: 5, Instances: 17},
	}
}

// wantMeta is testMeta as Read returns it for a state of size bytes.
func wantMeta(size int64) Meta {
	m := testMeta()
	m.FormatVersion = FormatVersion
	m.Size = size
	return m
}

// testState returns n bytes of deterministic content that compresses moderately,
// like a bbolt file: pages that are partly random and partly zero.
func testState(n int) []byte {
	b := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	for off := 0; off < n; off += 4096 {
		_, _ = rng.Read(b[off:min(off+1024, n)])
	}
	return b
}

// mustWrite returns the archive Write produces for testMeta and state.
func mustWrite(t testing.TB, state []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, testMeta(), bytes.NewReader(state), int64(len(state))); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

// mustMetaJSON returns meta.json as Write encodes it for testMeta and size.
func mustMetaJSON(t testing.TB, size int) string {
	t.Helper()
	b, err := encodeMeta(wantMeta(int64(size)))
	if err != nil {
		t.Fatalf("encodeMeta: %v", err)
	}
	return string(b)
}

// sumsOf returns SHA256SUMS for the two member bodies, formatted independently of
// the package's own formatter.
func sumsOf(meta, state string) string {
	return fmt.Sprintf("%x  meta.json\n%x  state.db\n", sha256.Sum256([]byte(meta)), sha256.Sum256([]byte(state)))
}

// rawMember is one tar entry of a hand-made archive.
type rawMember struct {
	name     string
	body     string
	typeflag byte // tar.TypeReg if 0
}

// members returns the three members of a valid archive with the given bodies.
func members(meta, state string) []rawMember {
	return []rawMember{{name: metaName, body: meta}, {name: stateName, body: state}, {name: sumsName, body: sumsOf(meta, state)}}
}

// rawArchive builds archives that Write would never produce.
type rawArchive struct {
	members  []rawMember
	noEnd    bool        // leave out the tar end-of-archive marker
	afterTar string      // bytes inside the gzip stream after the tar archive
	header   gzip.Header // gzip header fields; the zero value is what Write uses
	level    int         // gzip level; 0 means gzip.DefaultCompression
	stored   bool        // gzip.NoCompression: the tar bytes appear verbatim
	after    string      // bytes after the gzip stream
}

func (a rawArchive) bytes(t testing.TB) []byte {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, m := range a.members {
		hdr := &tar.Header{Name: m.name, Mode: 0o600, Size: int64(len(m.body)), Typeflag: m.typeflag}
		switch m.typeflag {
		case 0:
			hdr.Typeflag = tar.TypeReg
		case tar.TypeSymlink:
			hdr.Linkname, hdr.Size = "elsewhere", 0
		case tar.TypeDir:
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", m.name, err)
		}
		if _, err := tw.Write([]byte(m.body[:hdr.Size])); err != nil {
			t.Fatalf("tar body %q: %v", m.name, err)
		}
	}
	var err error
	if a.noEnd {
		err = tw.Flush()
	} else {
		err = tw.Close()
	}
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	tarBuf.WriteString(a.afterTar)

	var out bytes.Buffer
	level := a.level
	switch {
	case a.stored:
		level = gzip.NoCompression
	case level == 0:
		level = gzip.DefaultCompression
	}
	zw, err := gzip.NewWriterLevel(&out, level)
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	zw.Header = a.header
	if zw.Header.OS == 0 {
		zw.Header.OS = 255 // what compress/gzip writes by default
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	out.WriteString(a.after)
	return out.Bytes()
}

// mustFormatError asserts that err is a *FormatError for member whose message
// contains every one of want.
func mustFormatError(t testing.TB, err error, member string, want ...string) *FormatError {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want a format error for %q", member)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidArchive) {
		t.Fatalf("got %T %v, want a *FormatError matching ErrInvalidArchive", err, err)
	}
	if fe.Member != member {
		t.Errorf("Member = %q, want %q (error: %v)", fe.Member, member, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	return fe
}

// mustBeEmpty asserts that dir holds no file, i.e. nothing was left behind.
func mustBeEmpty(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}
