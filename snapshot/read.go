package snapshot

import (
	"archive/tar"
	"bufio"
	"compress/flate"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// DefaultMaxExpansion is the default of ReadOptions.MaxExpansion: state.db may be at
// most 256 times the size of the compressed archive. Roster's states compress 15 to 40
// times (measured with 20,000 instances: 22 times without metadata, 24 with a little,
// 15 after most were deregistered); the most repetitive state measured, every instance
// carrying the same 4 KiB of metadata, 72 times. A gzip bomb expands about 1,000 times
// (deflate's maximum is 1,032).
const DefaultMaxExpansion = 256

// expansionAllowance is extracted whatever the expansion, so that the limit does not
// bite small archives, whose fixed overheads compress best (an empty state is 24 KiB
// and its archive 0.7 KiB).
const expansionAllowance = 1 << 20

// ReadOptions configures Read and Inspect. The zero value is valid.
type ReadOptions struct {
	// Dir is the directory state.db is extracted into; os.TempDir() if empty.
	Dir string
	// MaxStateSize, if positive, rejects an archive whose state.db is larger, before
	// anything is extracted. MaxStateSize (the constant) applies in any case.
	MaxStateSize int64
	// MaxExpansion bounds decompression, so that a small archive cannot make Read
	// write a large file: state.db may not grow beyond MaxExpansion times the
	// compressed bytes read so far, plus 1 MiB. It is checked as state.db is read
	// (nothing beyond the bound is written), and before anything is extracted when
	// ArchiveSize is known. 0 means DefaultMaxExpansion; negative, no bound.
	MaxExpansion int64
	// ArchiveSize, if positive, is the size of the whole archive (the file's size, an
	// upload's Content-Length). With it, a state.db that meta.json declares larger than
	// MaxExpansion allows is refused before anything is extracted.
	ArchiveSize int64
	// MinFree, if positive, is the free space extraction must leave on the file system
	// of Dir. Before extracting, Read requires room for all of state.db beyond it;
	// while writing, it checks again before every write that what remains still fits
	// (other writers share the disk). A refusal matches ErrNoSpace. The checks need
	// statfs(2) (Linux, macOS, FreeBSD, DragonFly); elsewhere they are skipped.
	MinFree int64
	// Check, if set, is called with the path of the extracted state.db (complete
	// and closed) and the archive's Meta after every other check passed. An error
	// rejects the archive with a *FormatError for state.db that wraps it. CheckState
	// is the check for Roster's state files.
	Check func(statePath string, meta Meta) error
}

// Archive is an archive that passed every check of Read, with its state.db extracted.
type Archive struct {
	// Meta is the archive's meta.json.
	Meta Meta
	// StatePath is the extracted state.db: a temporary file of exactly Meta.Size
	// bytes whose SHA-256 matches SHA256SUMS. Close removes it; the caller may also
	// move it away first.
	StatePath string

	closed bool
}

// Close removes the extracted state.db (if it is still there). Calling it again does
// nothing.
func (a *Archive) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	if err := os.Remove(a.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return localError("removing the extracted state.db", err)
	}
	return nil
}

// Read checks the whole archive read from r and extracts its state.db into a
// temporary file in opts.Dir. It returns only after reading r to the end of the
// archive and verifying everything: the gzip header, checksum and length, that no
// byte follows the gzip stream, the tar structure and end marker, that the members
// are exactly meta.json, state.db and SHA256SUMS in that order, meta.json (strict
// JSON, supported format version), the size of state.db against meta.json, both
// SHA-256 sums, and finally opts.Check. Memory use does not depend on the size of
// the archive.
//
// A problem with the archive is a *FormatError (errors.Is(err, ErrInvalidArchive)),
// and so is a state.db beyond opts.MaxStateSize or opts.MaxExpansion; a lack of disk
// space matches ErrNoSpace; a read error of r is returned wrapped as it is. Errors of
// local files name no path (they may reach whoever sent the archive). On any error
// nothing is left in opts.Dir.
func Read(r io.Reader, opts ReadOptions) (*Archive, error) {
	meta, path, err := readArchive(r, opts, true)
	if err != nil {
		return nil, err
	}
	return &Archive{Meta: meta, StatePath: path}, nil
}

// Inspect performs the checks of Read and returns the archive's Meta, for
// `roster snapshot inspect`. It extracts state.db (and removes it again) only when
// opts.Check is set; otherwise it needs no disk space.
func Inspect(r io.Reader, opts ReadOptions) (Meta, error) {
	meta, path, err := readArchive(r, opts, opts.Check != nil)
	if err != nil {
		return Meta{}, err
	}
	if path != "" {
		if err := os.Remove(path); err != nil {
			return Meta{}, localError("removing the extracted state.db", err)
		}
	}
	return meta, nil
}

const (
	gzipHeaderLen = 10
	tarBlockSize  = 512
	// maxDrain bounds how much more of the gzip stream a content error reads to find
	// out whether the stream itself is corrupt, which is the better diagnosis.
	maxDrain = 64 << 20
)

// reader holds the state of one readArchive call. Its layers, from the caller's
// bytes up: src (records I/O errors), br (an io.ByteReader, so that the gzip reader
// stops exactly at the end of its member), the gzip reader, plain (the decompressed
// tar stream: counts its bytes, records gzip errors), tr.
type reader struct {
	opts    ReadOptions
	extract bool

	src   *trackReader
	br    *bufio.Reader
	plain *trackReader
	tr    *tar.Reader

	meta      Meta
	metaSum   [sha256.Size]byte
	stateSum  [sha256.Size]byte
	statePath string
	endMarker int64 // offset in plain where the tar end-of-archive marker must start
}

func readArchive(r io.Reader, opts ReadOptions, extract bool) (Meta, string, error) {
	rd := &reader{opts: opts, extract: extract, src: &trackReader{r: r}}
	if err := rd.run(); err != nil {
		if rd.statePath != "" {
			_ = os.Remove(rd.statePath) // best effort: the archive error is what matters
		}
		return Meta{}, "", err
	}
	return rd.meta, rd.statePath, nil
}

func (rd *reader) run() error {
	if err := rd.openGzip(); err != nil {
		return err
	}
	if err := rd.readMeta(); err != nil {
		return err
	}
	if err := rd.readState(); err != nil {
		return err
	}
	if err := rd.readSums(); err != nil {
		return err
	}
	if err := rd.readEnd(); err != nil {
		return err
	}
	if rd.opts.Check != nil {
		if err := rd.opts.Check(rd.statePath, rd.meta); err != nil {
			// The temporary path means nothing to whoever sent the archive.
			reason := strings.ReplaceAll(err.Error(), rd.statePath+": ", "")
			reason = strings.ReplaceAll(reason, rd.statePath, stateName)
			return &FormatError{Member: stateName, Reason: "rejected by the state check: " + reason, Err: err}
		}
	}
	return nil
}

func (rd *reader) openGzip() error {
	rd.br = bufio.NewReaderSize(rd.src, 32<<10)
	hdr, _ := rd.br.Peek(gzipHeaderLen)
	switch {
	case rd.src.err != nil:
		return rd.ioError()
	case len(hdr) == 0:
		return invalid("", "empty input: a snapshot archive is a gzip stream")
	case hdr[0] != 0x1f || len(hdr) > 1 && hdr[1] != 0x8b:
		return invalid("", "not a gzip stream: a snapshot archive starts with the bytes 1f8b, this input with %x", hdr[:min(len(hdr), 2)])
	case len(hdr) < gzipHeaderLen:
		return invalid("", "archive is truncated: the gzip header is incomplete")
	}
	if reason := checkGzipHeader(hdr); reason != "" {
		return invalid("", "gzip header: %s; the archive is corrupt or was not written by Roster", reason)
	}
	zr, err := gzip.NewReader(rd.br)
	if err != nil {
		if rd.src.err != nil {
			return rd.ioError()
		}
		return gzipError(err, nil)
	}
	zr.Multistream(false)
	rd.plain = &trackReader{r: zr}
	rd.tr = tar.NewReader(rd.plain)
	return nil
}

// checkGzipHeader compares the fixed 10-byte gzip header with the one Write
// produces. None of these bytes is covered by a checksum, so this is the only way a
// damaged header is noticed.
func checkGzipHeader(h []byte) string {
	switch {
	case h[2] != 8:
		return fmt.Sprintf("compression method is %d, not 8 (deflate)", h[2])
	case h[3] != 0:
		return fmt.Sprintf("flags byte is %#02x, not 0 (no optional header fields)", h[3])
	case h[4]|h[5]|h[6]|h[7] != 0:
		return fmt.Sprintf("modification time is %x, not 0", h[4:8])
	case h[8] != 0:
		return fmt.Sprintf("extra flags byte is %#02x, not 0", h[8])
	case h[9] != 255:
		return fmt.Sprintf("operating system byte is %d, not 255 (unknown)", h[9])
	}
	return ""
}

func (rd *reader) readMeta() error {
	hdr, err := rd.next(metaName)
	if err != nil {
		return err
	}
	if hdr.Size > maxMetaSize {
		return rd.content(invalid(metaName, "is %d bytes, more than the %d allowed", hdr.Size, maxMetaSize))
	}
	data, err := io.ReadAll(rd.tr)
	if err != nil {
		return rd.streamError(metaName, err)
	}
	rd.metaSum = sha256.Sum256(data)
	m, err := parseMeta(data)
	if err != nil {
		return rd.content(&FormatError{Member: metaName, Reason: err.Error()})
	}
	rd.meta = m
	return nil
}

func (rd *reader) readState() error {
	hdr, err := rd.next(stateName)
	if err != nil {
		return err
	}
	if hdr.Size != rd.meta.Size {
		return rd.content(invalid(stateName, "size mismatch: the member is %d bytes, meta.json says %d", hdr.Size, rd.meta.Size))
	}
	if limit := rd.opts.MaxStateSize; limit > 0 && hdr.Size > limit {
		return rd.content(invalid(stateName, "is %d bytes, more than the limit of %d", hdr.Size, limit))
	}
	ratio := rd.opts.MaxExpansion
	if ratio == 0 {
		ratio = DefaultMaxExpansion
	}
	if size := rd.opts.ArchiveSize; ratio > 0 && size > 0 && hdr.Size > mulAdd(ratio, size, expansionAllowance) {
		return tooLarge(hdr.Size, size, ratio)
	}
	if rd.extract && rd.opts.MinFree > 0 {
		if err := CheckSpace(rd.opts.Dir, hdr.Size, rd.opts.MinFree); err != nil {
			return fmt.Errorf("snapshot: extracting state.db: %w", err)
		}
	}
	h := sha256.New()
	g := &guard{rd: rd, dst: h, ratio: ratio, size: hdr.Size}
	var f *os.File
	if rd.extract {
		f, err = os.CreateTemp(rd.opts.Dir, "roster-restore-*.db")
		if err != nil {
			return localError("extracting state.db: creating a temporary file", err)
		}
		rd.statePath = f.Name()
		g.dst, g.file = io.MultiWriter(f, h), true
	}
	src := &trackReader{r: rd.tr}
	n, err := io.CopyBuffer(g, src, make([]byte, min(max(hdr.Size, 512), 128<<10)))
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	switch {
	case g.err != nil:
		return g.err
	case src.err != nil:
		return rd.streamError(stateName, src.err)
	case err != nil:
		return localError("extracting state.db", err)
	case n != hdr.Size:
		return rd.content(invalid(stateName, "holds %d bytes, its tar header says %d", n, hdr.Size))
	}
	h.Sum(rd.stateSum[:0])
	return nil
}

// guard passes state.db on to dst, checking before each write that the bytes written
// so far stay within the expansion bound of the compressed bytes read, and, when
// extracting with ReadOptions.MinFree, that what remains of state.db still fits on the
// disk. It counts what is written rather than what the tar stream holds, so that no
// tar feature (a sparse member's holes, say) writes bytes the bound does not see.
type guard struct {
	rd      *reader
	dst     io.Writer
	ratio   int64 // negative: no expansion bound
	size    int64 // of state.db
	file    bool  // dst includes the extracted file
	written int64
	err     error // the refusal, once a check failed
}

func (g *guard) Write(p []byte) (int, error) {
	next := g.written + int64(len(p))
	if g.ratio > 0 {
		// The compressed bytes read so far are an upper bound of those behind p: the
		// bound errs on the generous side by at most the reader's buffer.
		if compressed := g.rd.src.n; next > mulAdd(g.ratio, compressed, expansionAllowance) {
			g.err = tooExpanded(g.size, next, compressed, g.ratio)
			return 0, g.err
		}
	}
	if g.file && g.rd.opts.MinFree > 0 {
		if err := CheckSpace(g.rd.opts.Dir, g.size-g.written, g.rd.opts.MinFree); err != nil {
			g.err = fmt.Errorf("snapshot: extracting state.db: %w", err)
			return 0, g.err
		}
	}
	n, err := g.dst.Write(p)
	g.written += int64(n)
	return n, err
}

// tooLarge refuses a state.db of size bytes, declared in an archive of archive bytes,
// before extracting it.
func tooLarge(size, archive, ratio int64) *FormatError {
	return invalid(stateName, "is %d bytes, more than %d times the %d-byte archive: a state expands at most %d times "+
		"(real states compress far less)", size, ratio, archive, ratio)
}

// tooExpanded refuses a state.db of size bytes whose first written bytes came from
// only compressed bytes of the archive.
func tooExpanded(size, written, compressed, ratio int64) *FormatError {
	return invalid(stateName, "is %d bytes and expands more than %d times: its first %d bytes came from the first %d "+
		"bytes of the archive (real states compress far less)", size, ratio, written, compressed)
}

func (rd *reader) readSums() error {
	hdr, err := rd.next(sumsName)
	if err != nil {
		return err
	}
	if hdr.Size > maxSumsSize {
		return rd.content(invalid(sumsName, "is %d bytes, more than the %d allowed", hdr.Size, maxSumsSize))
	}
	data, err := io.ReadAll(rd.tr)
	if err != nil {
		return rd.streamError(sumsName, err)
	}
	// The tar reader has consumed exactly the member's data; its padding follows.
	rd.endMarker = rd.plain.n + (-hdr.Size & (tarBlockSize - 1))
	sums, err := parseSums(data)
	if err != nil {
		return rd.content(&FormatError{Member: sumsName, Reason: err.Error()})
	}
	for _, c := range []struct {
		name string
		sum  [sha256.Size]byte
	}{{metaName, rd.metaSum}, {stateName, rd.stateSum}} {
		if sums[c.name] != c.sum {
			return rd.content(invalid(c.name, "checksum mismatch: SHA256SUMS lists %x, the content hashes to %x", sums[c.name], c.sum))
		}
	}
	return nil
}

// readEnd checks that the tar archive ends with its marker right after SHA256SUMS,
// that the gzip stream ends right after the tar archive (reading its end also
// verifies the gzip checksum and length), and that nothing follows the gzip stream.
func (rd *reader) readEnd() error {
	hdr, err := rd.tr.Next()
	switch {
	case err == nil || errors.Is(err, tar.ErrInsecurePath):
		return rd.content(misplaced(hdr.Name, memberCount))
	case err != io.EOF:
		return rd.streamError("", err)
	case rd.plain.n != rd.endMarker+2*tarBlockSize:
		return rd.content(invalid("", "the tar archive lacks its end-of-archive marker"))
	}
	n, _ := io.CopyN(io.Discard, rd.plain, 1)
	switch {
	case rd.src.err != nil:
		return rd.ioError()
	case rd.plain.err != nil:
		return gzipError(rd.plain.err, nil)
	case n > 0:
		return invalid("", "unexpected data inside the gzip stream after the tar end-of-archive marker")
	}
	rest, _ := rd.br.Peek(8)
	switch {
	case rd.src.err != nil:
		return rd.ioError()
	case len(rest) >= 2 && rest[0] == 0x1f && rest[1] == 0x8b:
		return invalid("", "a second gzip stream follows the archive")
	case len(rest) > 0:
		return invalid("", "unexpected data after the end of the gzip stream (starting with %x)", rest)
	}
	return nil
}

// memberOrder lists the members in archive order.
func memberOrder() [memberCount]string {
	return [memberCount]string{metaName, stateName, sumsName}
}

const memberCount = 3

// memberPos is the position of name in memberOrder, or -1.
func memberPos(name string) int {
	for i, m := range memberOrder() {
		if m == name {
			return i
		}
	}
	return -1
}

// next reads the header of the member that must come next.
func (rd *reader) next(want string) (*tar.Header, error) {
	hdr, err := rd.tr.Next()
	switch {
	case err == io.EOF:
		return nil, rd.content(invalid(want, "missing: the tar archive ends before it (an archive holds %s)", memberList))
	case err != nil && !errors.Is(err, tar.ErrInsecurePath):
		return nil, rd.streamError(want, err)
	case hdr.Name != want:
		return nil, rd.content(misplaced(hdr.Name, memberPos(want)))
	case hdr.Typeflag != tar.TypeReg:
		return nil, rd.content(invalid(want, "is not a regular file (tar type flag %q)", hdr.Typeflag))
	}
	return hdr, nil
}

// misplaced describes finding member name where the member at position want of
// memberOrder (or the end of the archive) was expected.
func misplaced(name string, want int) *FormatError {
	pos := memberPos(name)
	switch {
	case pos < 0:
		return invalid(clip(name, 100), "unexpected member (an archive holds only %s)", memberList)
	case pos < want:
		return invalid(name, "duplicate member")
	default:
		return invalid(memberOrder()[want], "missing or out of order: found %s in its place (an archive holds %s)", name, memberList)
	}
}

func (rd *reader) ioError() error {
	return fmt.Errorf("snapshot: reading archive: %w", rd.src.err)
}

// streamError classifies err, met while reading member ("" for the container) from
// the tar reader: a read error of the source, a gzip error underneath, or a
// malformed tar stream.
func (rd *reader) streamError(member string, err error) error {
	if rd.src.err != nil {
		return rd.ioError()
	}
	if rd.plain.err != nil {
		return gzipError(rd.plain.err, nil)
	}
	reason := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		reason = "the tar stream ends inside this member (archive truncated)"
		if member == "" {
			reason = "the tar stream ends inside its end-of-archive marker (archive truncated)"
		}
	}
	return rd.content(&FormatError{Member: member, Reason: reason})
}

// content returns fe, found in the decompressed data, unless the rest of the gzip
// stream turns out to be corrupt or truncated: then the gzip error, which explains fe,
// is returned. At most maxDrain more bytes are read to find out.
func (rd *reader) content(fe *FormatError) error {
	_, _ = io.CopyN(io.Discard, rd.plain, maxDrain) // errors are recorded by the trackReaders
	switch {
	case rd.src.err != nil:
		return rd.ioError()
	case rd.plain.err != nil:
		return gzipError(rd.plain.err, fe)
	}
	return fe
}

// gzipError describes a failure of the gzip layer; symptom, if not nil, is what it
// caused higher up.
func gzipError(err error, symptom *FormatError) *FormatError {
	var corrupt flate.CorruptInputError
	var reason string
	switch {
	case errors.Is(err, gzip.ErrChecksum):
		reason = "gzip checksum mismatch: the archive is corrupt"
	case errors.As(err, &corrupt):
		reason = fmt.Sprintf("corrupt compressed data at byte %d of the deflate stream: the archive is corrupt", int64(corrupt))
	case errors.Is(err, io.ErrUnexpectedEOF):
		reason = "archive is truncated: the gzip stream ends early"
	case errors.Is(err, gzip.ErrHeader):
		reason = "invalid gzip header"
	default:
		reason = "gzip: " + err.Error()
	}
	if symptom != nil {
		first := symptom.Reason
		if symptom.Member != "" {
			first = symptom.Member + ": " + first
		}
		reason += " (first seen as: " + first + ")"
	}
	return &FormatError{Reason: reason, Err: err}
}
