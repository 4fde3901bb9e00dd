package snapshot

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
)

// TestRead_RejectsTruncatedArchives checks that an archive cut anywhere is refused:
// every prefix of a small archive, and cuts spread over a larger one (through Read,
// which must also remove what it extracted).
func TestRead_RejectsTruncatedArchives(t *testing.T) {
	small := mustWrite(t, testState(3000))
	for cut := range small {
		_, err := Inspect(bytes.NewReader(small[:cut]), ReadOptions{})
		if err == nil {
			t.Fatalf("archive cut at %d of %d bytes accepted", cut, len(small))
		}
		mustFormatError(t, err, errMember(err))
	}

	large := mustWrite(t, testState(1<<20))
	cuts := append(every(len(large), len(large)/37), 1, 9, 10, 11, len(large)-8, len(large)-4, len(large)-1)
	dir := t.TempDir()
	for _, cut := range cuts {
		_, err := Read(bytes.NewReader(large[:cut]), ReadOptions{Dir: dir})
		if err == nil {
			t.Fatalf("archive cut at %d of %d bytes accepted", cut, len(large))
		}
		mustFormatError(t, err, errMember(err))
	}
	mustBeEmpty(t, dir)
}

// TestRead_RejectsEveryFlippedByte checks that damaging any single byte of an
// archive is detected, gzip header and trailer included: inverting any byte must
// fail. Flipping a single bit must fail too, except for the few bits deflate itself
// ignores (padding after the final block, redundant choices in a block's Huffman
// header): such an archive decompresses to the identical content, so accepting it
// is harmless, and the test checks exactly that.
func TestRead_RejectsEveryFlippedByte(t *testing.T) {
	archive := mustWrite(t, testState(3000))
	original := gunzip(t, archive)
	var harmless atomic.Int64
	for _, mask := range []byte{0xff, 1, 2, 4, 8, 16, 32, 64, 128} {
		t.Run(fmt.Sprintf("xor %#02x", mask), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			damaged := make([]byte, len(archive))
			for pos := range archive {
				copy(damaged, archive)
				damaged[pos] ^= mask
				var err error
				if mask == 0xff { // through Read, which must also clean up
					var a *Archive
					if a, err = Read(bytes.NewReader(damaged), ReadOptions{Dir: dir}); err == nil {
						a.Close()
					}
				} else {
					_, err = Inspect(bytes.NewReader(damaged), ReadOptions{})
				}
				if err != nil {
					mustFormatError(t, err, errMember(err))
					continue
				}
				inDeflate := pos >= gzipHeaderLen && pos < len(archive)-8
				switch {
				case mask == 0xff || !inDeflate:
					t.Errorf("archive with byte %d ^ %#02x accepted", pos, mask)
				case !bytes.Equal(gunzip(t, damaged), original):
					t.Errorf("archive with byte %d ^ %#02x accepted although its content differs", pos, mask)
				default:
					harmless.Add(1)
				}
			}
			mustBeEmpty(t, dir)
		})
	}
	t.Cleanup(func() {
		t.Logf("%d of %d single-bit flips hit bits deflate ignores: same content, accepted", harmless.Load(), 8*len(archive))
	})
}

// gunzip decompresses b without any of Read's checks.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// every returns 0, step, 2*step, ... below n.
func every(n, step int) []int {
	var out []int
	for i := 0; i < n; i += step {
		out = append(out, i)
	}
	return out
}

// errMember returns the Member of a *FormatError, so that mustFormatError checks
// only the type of an error whose member depends on where the damage fell.
func errMember(err error) string {
	if fe, ok := err.(*FormatError); ok {
		return fe.Member
	}
	return ""
}
