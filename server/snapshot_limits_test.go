package server_test

import (
	"archive/tar"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
)

// withIndex returns the archive of meta (its index replaced) and state.
func withIndex(t *testing.T, meta snapshot.Meta, state []byte, index uint64) []byte {
	t.Helper()
	meta.Index = index
	mj := metaJSON(t, meta, 0)
	return buildArchive(t, []member{{"meta.json", mj}, {"state.db", state}, {"SHA256SUMS", sums(mj, state)}})
}

// mustRefuse asserts that err is the API's 400 for field whose message holds want.
func mustRefuse(t *testing.T, err error, status int, field, want string) {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want a %d", err, status)
	}
	if apiErr.Status != status || apiErr.Field != field || !strings.Contains(apiErr.Message, want) {
		t.Fatalf("got %d %s field %q: %q; want %d field %q with %q", apiErr.Status, apiErr.Code, apiErr.Field,
			apiErr.Message, status, field, want)
	}
}

// An archive whose index is near 2^64 is refused with a 400 before anything changes,
// and so is one beyond the restore limit; RestoreState itself refuses such an index (and
// term and size) too. The cluster keeps working: writes succeed and the next restore is
// not blocked. At the limit, a restore succeeds, and the cluster keeps writing above it,
// restarts, and saves archives that are themselves valid.
func TestSnapshot_IndexBeyondLimitsIsRefusedAndClusterKeepsWorking(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 120*time.Second)
	leader := c.MustLeader()
	lc := c.Nodes[leader].Client()
	noErr(t, c.WaitApplied(ctx, registerUnprobed(ctx, t, lc, "keep", "127.100.0.1", 1)))
	good, _, _ := save(ctx, t, lc, false)
	meta, state := archiveParts(t, good)
	wrote(t)(lc.UpsertNamespace(ctx, "after-save", api.NamespaceRequest{}))
	c.WaitSettled()
	before := captureState(t, c)

	for i, tc := range []struct {
		index  uint64
		field  string
		reason string
	}{
		{1<<64 - 1, "meta.json", `field "index" is 18446744073709551615, above the limit of 9007199254740991`},
		{1<<64 - 2, "meta.json", `field "index" is 18446744073709551614, above the limit`},
		{1 << 63, "meta.json", `field "index" is 9223372036854775808, above the limit`},
		{snapshot.MaxIndex + 1, "meta.json", `field "index" is 9007199254740992, above the limit`},
		// Within the format, beyond what a restore accepts.
		{snapshot.MaxIndex, "index", "above the limit of 4503599627370495"},
		{snapshot.MaxRestoreIndex + 1, "index", "above the limit of 4503599627370495"},
	} {
		// Alternate between the leader and a follower (which forwards the body).
		nd := c.Nodes[leader]
		if i%2 == 1 {
			nd = c.Nodes[c.Followers()[0]]
		}
		err := nd.Client().RestoreSnapshot(ctx, bytes.NewReader(withIndex(t, meta, state, tc.index)))
		mustRefuse(t, err, http.StatusBadRequest, tc.field, tc.reason)
		if diff := captureState(t, c).unchangedSince(before); diff != "" {
			t.Fatalf("index %d: a refused restore changed the cluster: %s", tc.index, diff)
		}
	}

	// RestoreState refuses on its own, before it reads the state.
	node := c.Nodes[leader].Server.Node()
	for _, tc := range []struct {
		index, term uint64
		size        int64
		field       string
	}{
		{1<<64 - 1, meta.Term, int64(len(state)), "index"},
		{1 << 63, meta.Term, int64(len(state)), "index"},
		{snapshot.MaxRestoreIndex + 1, meta.Term, int64(len(state)), "index"},
		{meta.Index, 1<<64 - 1, int64(len(state)), "term"},
		{meta.Index, meta.Term, snapshot.MaxStateSize + 1, "size"},
		{meta.Index, meta.Term, -1, "size"},
	} {
		r := &countingReader{r: bytes.NewReader(state)}
		_, err := node.RestoreState(ctx, tc.index, tc.term, r, tc.size)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Fatalf("RestoreState(index %d, term %d, size %d): %v, want a validation error for %s", tc.index, tc.term, tc.size, err, tc.field)
		}
		if r.n != 0 {
			t.Fatalf("RestoreState read %d bytes of a state it refused", r.n)
		}
	}
	// Nor does it start a restore its data directory has no room for: two copies of a
	// 1 TiB state.
	r := &countingReader{r: bytes.NewReader(state)}
	if _, err := node.RestoreState(ctx, meta.Index, meta.Term, r, snapshot.MaxStateSize); !errors.Is(err, snapshot.ErrNoSpace) || r.n != 0 {
		t.Fatalf("RestoreState of a 1 TiB state: %v after reading %d bytes, want ErrNoSpace before reading", err, r.n)
	}
	if diff := captureState(t, c).unchangedSince(before); diff != "" {
		t.Fatalf("a refused RestoreState changed the cluster: %s", diff)
	}

	// Writes still work, and the next restore is not blocked.
	f := c.Followers()[0]
	wrote(t)(c.Nodes[f].Client().UpsertNamespace(ctx, "still-writable", api.NamespaceRequest{}))
	noErr(t, c.Nodes[f].Client().RestoreSnapshot(ctx, bytes.NewReader(good)))

	// At the limit.
	noErr(t, lc.RestoreSnapshot(ctx, bytes.NewReader(withIndex(t, meta, state, snapshot.MaxRestoreIndex))))
	idx := wrote(t)(c.Nodes[f].Client().UpsertNamespace(ctx, "above-the-limit", api.NamespaceRequest{}))
	if idx <= snapshot.MaxRestoreIndex {
		t.Fatalf("a write after a restore at %d landed at %d", uint64(snapshot.MaxRestoreIndex), idx)
	}
	noErr(t, c.WaitApplied(ctx, idx))
	c.Stop(f)
	c.Start(f)
	leader = c.MustLeader()
	c.WaitSettled()
	idx2 := wrote(t)(c.Nodes[f].Client().UpsertNamespace(ctx, "after-restart", api.NamespaceRequest{}))
	noErr(t, c.WaitApplied(ctx, idx2))
	_, meta2, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	if meta2.Index < idx2 || meta2.Index > snapshot.MaxIndex {
		t.Fatalf("archive saved after the restore at index %d, want between %d and %d", meta2.Index, idx2, uint64(snapshot.MaxIndex))
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A gzip bomb (a 2 MiB archive declaring a state of 2 GiB, the attack found in review)
// is refused with a 400 before the leader writes more than a sliver of it, whether its
// length is known up front or not; the data directory is left as it was, and the answer
// names no path of the server.
func TestSnapshot_GzipBombLeavesTheDataDirAlone(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	ctx := ctxT(t, 120*time.Second)
	nd := c.Nodes[c.MustLeader()]
	good, _, _ := save(ctx, t, nd.Client(), false)
	meta, _ := archiveParts(t, good)

	// The bomb is well-formed: only its expansion is hostile (checked on a small one:
	// decompressing 2 GiB takes a while under the race detector).
	if _, err := snapshot.Inspect(bytes.NewReader(zeroBomb(t, meta, 64<<20)), snapshot.ReadOptions{MaxExpansion: -1}); err != nil {
		t.Fatalf("the bomb is not a well-formed archive: %v", err)
	}
	bomb := zeroBomb(t, meta, 2<<30)
	t.Logf("bomb: %d bytes declaring a state of %d", len(bomb), 2<<30)

	for _, body := range []io.Reader{bytes.NewReader(bomb), io.MultiReader(bytes.NewReader(bomb))} {
		err := nd.Client().RestoreSnapshot(ctx, body)
		mustRefuse(t, err, http.StatusBadRequest, "state.db", "more than 256 times")
		if strings.Contains(err.Error(), nd.DataDir) {
			t.Errorf("the answer names the data directory: %v", err)
		}
		entries, err := os.ReadDir(nd.DataDir + "/snapshot-tmp")
		noErr(t, err)
		if len(entries) != 0 {
			t.Errorf("%d files left in snapshot-tmp", len(entries))
		}
	}
}

// zeroBomb returns a well-formed archive of meta (its size and time filled in) whose
// state.db is size zero bytes, a multiple of 1 MiB. Compressing gigabytes is slow under
// the race detector, so the deflate stream is assembled: a block of 1 MiB of zeros,
// flushed, compresses to the same bytes every time once the window holds only zeros,
// and is repeated.
func zeroBomb(t *testing.T, meta snapshot.Meta, size int64) []byte {
	t.Helper()
	const chunk = 1 << 20
	meta.FormatVersion, meta.Size, meta.CreatedAt = snapshot.FormatVersion, size, time.Now().UTC()
	mj, err := json.Marshal(meta)
	noErr(t, err)
	zero := make([]byte, chunk)
	h := sha256.New()
	for range size / chunk {
		h.Write(zero)
	}
	sumsBody := fmt.Appendf(nil, "%x  meta.json\n%x  state.db\n", sha256.Sum256(mj), h.Sum(nil))

	var head, tail bytes.Buffer
	tw := tar.NewWriter(&head)
	noErr(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "meta.json", Size: int64(len(mj)), Mode: 0o600}))
	_, err = tw.Write(mj)
	noErr(t, err)
	// WriteHeader writes the header block at once; the zeros are added below.
	noErr(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "state.db", Size: size, Mode: 0o600}))
	tw = tar.NewWriter(&tail)
	noErr(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "SHA256SUMS", Size: int64(len(sumsBody)), Mode: 0o600}))
	_, err = tw.Write(sumsBody)
	noErr(t, err)
	noErr(t, tw.Close())

	var out, block bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}) // the header snapshot.Write produces
	fw, err := flate.NewWriter(&block, flate.DefaultCompression)
	noErr(t, err)
	flush := func(p []byte) []byte {
		block.Reset()
		_, err := fw.Write(p)
		noErr(t, err)
		noErr(t, fw.Flush())
		return bytes.Clone(block.Bytes())
	}
	out.Write(flush(head.Bytes()))
	out.Write(flush(zero))
	repeat := flush(zero)
	if again := flush(zero); !bytes.Equal(again, repeat) {
		t.Fatal("a flushed block of zeros does not repeat; build the bomb another way")
	}
	for range size/chunk - 1 {
		out.Write(repeat)
	}
	block.Reset()
	_, err = fw.Write(tail.Bytes())
	noErr(t, err)
	noErr(t, fw.Close())
	out.Write(block.Bytes())

	crc := crc32.Update(0, crc32.IEEETable, head.Bytes())
	for range size / chunk {
		crc = crc32.Update(crc, crc32.IEEETable, zero)
	}
	crc = crc32.Update(crc, crc32.IEEETable, tail.Bytes())
	total := int64(head.Len()) + size + int64(tail.Len())
	out.Write(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, crc), uint32(total)))
	return out.Bytes()
}

// A node whose disk cannot take an archive's state beyond the space it keeps free
// refuses it with a 413 before writing it, and a disk error is a 500 that keeps the
// node's paths to its log; neither answer names the data directory, and the node takes
// the archive once the problem is gone.
func TestSnapshot_DiskProblemsNameNoPath(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts(), func(cfg *server.Config) {
		cfg.Snapshot.MinFreeBytes = 1 << 60 // no disk has an exabyte free
	})
	ctx := ctxT(t, 60*time.Second)
	nd := c.Nodes[c.MustLeader()]
	archive, _, _ := save(ctx, t, nd.Client(), false)

	err := nd.Client().RestoreSnapshot(ctx, bytes.NewReader(archive))
	mustRefuse(t, err, http.StatusRequestEntityTooLarge, "", "not enough free disk space")
	if strings.Contains(err.Error(), nd.DataDir) {
		t.Errorf("the answer names the data directory: %v", err)
	}

	// Another node, with a normal reserve, whose upload directory was replaced by a
	// file: the space check passes, creating the temporary file fails.
	c = servertest.New(t, 1, servertest.FastTimeouts())
	nd = c.Nodes[c.MustLeader()]
	tmp := nd.DataDir + "/snapshot-tmp"
	noErr(t, os.Remove(tmp))
	noErr(t, os.WriteFile(tmp, nil, 0o600))
	err = nd.Client().RestoreSnapshot(ctx, bytes.NewReader(archive))
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError {
		t.Fatalf("restore with the upload directory replaced by a file: %v, want a 500", err)
	}
	if strings.Contains(err.Error(), nd.DataDir) || strings.Contains(err.Error(), "snapshot-tmp") {
		t.Errorf("the answer names a server path: %v", err)
	}
	noErr(t, os.Remove(tmp))
	noErr(t, os.Mkdir(tmp, 0o700))
	noErr(t, nd.Client().RestoreSnapshot(ctx, bytes.NewReader(archive)))
}

// A client that stalls in the middle of its upload is cut off after the idle timeout
// (408), on the leader and through a follower, and leaves nothing behind; meanwhile
// and afterwards, restores go through.
func TestSnapshot_StalledUploadIsCutOff(t *testing.T) {
	c := newSnapshotCluster(t, func(cfg *server.Config) { cfg.Snapshot.UploadIdleTimeout = 2 * time.Second })
	ctx := ctxT(t, 120*time.Second)
	leader := c.MustLeader()
	last := fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t))
	noErr(t, c.WaitApplied(ctx, last))
	archive, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	want := logicalOf(dump(t, c.Nodes[leader]))
	wrote(t)(c.Nodes[leader].Client().UpsertNamespace(ctx, "after-save", api.NamespaceRequest{}))

	for _, nd := range []*servertest.Node{c.Nodes[leader], c.Nodes[c.Followers()[0]]} {
		// Without the cut, this attempt would hang until its own deadline.
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		body := &stallingReader{data: archive[:len(archive)/2], done: attempt.Done()}
		start := time.Now()
		err := nd.Client().RestoreSnapshot(attempt, body)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusRequestTimeout || apiErr.Code != api.CodeTimeout ||
			!strings.Contains(apiErr.Message, "stalled") {
			t.Fatalf("%s: stalled upload: %v, want a 408", nd.ID, err)
		}
		t.Logf("%s: cut off after %v: %s", nd.ID, time.Since(start).Round(time.Millisecond), apiErr.Message)
		wait.For(t, 20*time.Second, "the leader to drop the partial upload", func() bool {
			entries, err := os.ReadDir(c.Nodes[leader].DataDir + "/snapshot-tmp")
			noErr(t, err)
			return len(entries) == 0
		})
	}
	noErr(t, c.Nodes[c.Followers()[1]].Client().RestoreSnapshot(ctx, bytes.NewReader(archive)))
	waitLogical(t, c, want, same)
}

// stallingReader yields data, then blocks until done is closed.
type stallingReader struct {
	data []byte
	done <-chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if len(r.data) > 0 {
		n := copy(p, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	<-r.done
	return 0, errors.New("the test gave up")
}
