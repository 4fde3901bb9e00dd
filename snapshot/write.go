package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// gzipLevel is the compression level of written archives. Read requires the gzip
// header byte for byte, and compress/gzip writes its XFL byte as 0 for every level
// but BestSpeed and BestCompression, so those two must not be used here.
const gzipLevel = gzip.DefaultCompression

// Write writes an archive of state to w, streaming: memory use does not depend on
// stateSize. stateSize must be the exact number of bytes state yields; Write fails,
// leaving a truncated archive that Read rejects, if state ends early or holds more.
//
// Write fills meta.FormatVersion with FormatVersion and meta.Size with stateSize (a
// non-zero value that disagrees is an error), sets a zero meta.CreatedAt to the
// current time, and stores CreatedAt in UTC. w is not closed. Equal inputs give
// byte-identical archives (with the same Go release, which fixes the deflate output).
func Write(w io.Writer, meta Meta, state io.Reader, stateSize int64) error {
	if stateSize < 0 {
		return fmt.Errorf("snapshot: negative state size %d", stateSize)
	}
	if meta.FormatVersion != 0 && meta.FormatVersion != FormatVersion {
		return fmt.Errorf("snapshot: cannot write format version %d, only %d", meta.FormatVersion, FormatVersion)
	}
	if meta.Size != 0 && meta.Size != stateSize {
		return fmt.Errorf("snapshot: meta.Size is %d but the state is %d bytes", meta.Size, stateSize)
	}
	meta.FormatVersion = FormatVersion
	meta.Size = stateSize
	if meta.CreatedAt.IsZero() {
		meta.CreatedAt = time.Now()
	}
	meta.CreatedAt = meta.CreatedAt.UTC()
	metaJSON, err := encodeMeta(meta)
	if err != nil {
		return fmt.Errorf("snapshot: meta: %w", err)
	}

	zw, err := gzip.NewWriterLevel(w, gzipLevel)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	tw := tar.NewWriter(zw)
	mtime := meta.CreatedAt.Truncate(time.Second)

	if err := writeMember(tw, metaName, metaJSON, mtime); err != nil {
		return err
	}
	if err := tw.WriteHeader(memberHeader(stateName, stateSize, mtime)); err != nil {
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	h := sha256.New()
	if err := copyState(io.MultiWriter(tw, h), state, stateSize); err != nil {
		return err
	}
	var stateSum [sha256.Size]byte
	h.Sum(stateSum[:0])
	if err := writeMember(tw, sumsName, formatSums(sha256.Sum256(metaJSON), stateSum), mtime); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	return nil
}

// WriteSpooled writes an archive of a state whose size is not known up front: it
// copies state into a temporary file in dir (os.TempDir() if dir is empty), then
// streams that file with Write. The temporary file is removed before WriteSpooled
// returns. A *store.Snapshot is an io.WriterTo.
func WriteSpooled(w io.Writer, meta Meta, state io.WriterTo, dir string) (err error) {
	f, err := os.CreateTemp(dir, "roster-snapshot-*.spool")
	if err != nil {
		return fmt.Errorf("snapshot: spooling state: %w", err)
	}
	defer func() {
		cerr := f.Close()
		rerr := os.Remove(f.Name())
		if err == nil {
			err = errors.Join(cerr, rerr)
		}
	}()
	if _, err := state.WriteTo(f); err != nil {
		return fmt.Errorf("snapshot: spooling state: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("snapshot: spooling state: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot: spooling state: %w", err)
	}
	return Write(w, meta, f, size)
}

// copyState copies exactly size bytes of state to dst and checks that state holds no
// more.
func copyState(dst io.Writer, state io.Reader, size int64) error {
	src := &trackReader{r: state}
	n, err := io.CopyN(dst, src, size)
	switch {
	case src.err != nil:
		return fmt.Errorf("snapshot: reading state: %w", src.err)
	case err == io.EOF:
		return fmt.Errorf("snapshot: state ended after %d of %d bytes", n, size)
	case err != nil:
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	var one [1]byte
	switch _, err := io.ReadFull(state, one[:]); err {
	case nil:
		return fmt.Errorf("snapshot: state holds more than the %d bytes announced", size)
	case io.EOF:
		return nil
	default:
		return fmt.Errorf("snapshot: reading state: %w", err)
	}
}

func writeMember(tw *tar.Writer, name string, body []byte, mtime time.Time) error {
	if err := tw.WriteHeader(memberHeader(name, int64(len(body)), mtime)); err != nil {
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	if _, err := tw.Write(body); err != nil {
		return fmt.Errorf("snapshot: writing archive: %w", err)
	}
	return nil
}

func memberHeader(name string, size int64, mtime time.Time) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     0o600,
		ModTime:  mtime,
	}
}

// trackReader passes reads through, counting bytes and remembering the first error
// other than io.EOF.
type trackReader struct {
	r   io.Reader
	n   int64
	err error
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n += int64(n)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}
