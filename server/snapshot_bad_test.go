package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// member is one file of a hand-built archive.
type member struct {
	name string
	body []byte
}

// buildArchive packs members the way snapshot.Write does (gzip with a bare header, a
// tar of regular files), whatever they hold.
func buildArchive(t *testing.T, members []member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	noErr(t, err)
	tw := tar.NewWriter(zw)
	for _, m := range members {
		noErr(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Size: int64(len(m.body)), Mode: 0o600}))
		_, err := tw.Write(m.body)
		noErr(t, err)
	}
	noErr(t, tw.Close())
	noErr(t, zw.Close())
	return buf.Bytes()
}

// archiveParts unpacks a valid archive into its meta and state.db.
func archiveParts(t *testing.T, archive []byte) (snapshot.Meta, []byte) {
	t.Helper()
	ar, err := snapshot.Read(bytes.NewReader(archive), snapshot.ReadOptions{Dir: t.TempDir()})
	noErr(t, err)
	defer func() { _ = ar.Close() }()
	state, err := os.ReadFile(ar.StatePath)
	noErr(t, err)
	return ar.Meta, state
}

// metaJSON encodes meta as meta.json, with formatVersion replaced when version != 0.
func metaJSON(t *testing.T, meta snapshot.Meta, version int) []byte {
	t.Helper()
	b, err := json.Marshal(meta)
	noErr(t, err)
	if version != 0 {
		var m map[string]any
		noErr(t, json.Unmarshal(b, &m))
		m["formatVersion"] = version
		b, err = json.Marshal(m)
		noErr(t, err)
	}
	return b
}

func sums(metaBody, state []byte) []byte {
	return fmt.Appendf(nil, "%x  meta.json\n%x  state.db\n", sha256.Sum256(metaBody), sha256.Sum256(state))
}

// clusterState is what must not change when a restore is refused: every node's state
// (its applied index aside, see below), its Raft log and its Raft snapshots.
type clusterState struct {
	dumps     map[string]store.State
	lastIndex map[string]uint64
	term      map[string]uint64
	snapshot  map[string]string
}

func captureState(t *testing.T, c *servertest.Cluster) clusterState {
	t.Helper()
	cs := clusterState{dumps: map[string]store.State{}, lastIndex: map[string]uint64{},
		term: map[string]uint64{}, snapshot: map[string]string{}}
	for _, nd := range c.Nodes {
		r := nd.Server.Node().Raft()
		d := dump(t, nd)
		d.AppliedIndex = 0
		cs.dumps[nd.ID] = d
		cs.lastIndex[nd.ID] = r.LastIndex()
		cs.term[nd.ID] = r.CurrentTerm()
		cs.snapshot[nd.ID] = r.Stats()["last_snapshot_index"]
	}
	return cs
}

// unchangedSince reports how cs differs from before, "" if it does not. The Raft log
// may only have grown by a leader election, which appends its own entries (a new term
// proves it); those entries change no record and no index, only the applied index.
func (cs clusterState) unchangedSince(before clusterState) string {
	for id, d := range cs.dumps {
		if !reflect.DeepEqual(d, before.dumps[id]) {
			return fmt.Sprintf("node %s: state\nbefore %+v\nafter  %+v", id, before.dumps[id], d)
		}
		if cs.snapshot[id] != before.snapshot[id] {
			return fmt.Sprintf("node %s: last Raft snapshot %s, was %s", id, cs.snapshot[id], before.snapshot[id])
		}
		if cs.lastIndex[id] != before.lastIndex[id] && cs.term[id] == before.term[id] {
			return fmt.Sprintf("node %s: Raft last index %d, was %d (same term %d)", id, cs.lastIndex[id], before.lastIndex[id], cs.term[id])
		}
	}
	return ""
}

// Every kind of bad archive is a 400 that names the member at fault and says what is
// wrong, and changes nothing: not the state of any node, not the Raft log.
func TestSnapshot_BadArchivesAreRefusedAndChangeNothing(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	leader := c.MustLeader()
	last := fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t))
	noErr(t, c.WaitApplied(ctx, last))
	good, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	meta, state := archiveParts(t, good)
	// Change the state after the save, so that a restore would be visible.
	wrote(t)(c.Nodes[leader].Client().UpsertNamespace(ctx, "after-save", api.NamespaceRequest{}))
	c.WaitSettled()
	before := captureState(t, c)

	mj := metaJSON(t, meta, 0)
	flippedState := bytes.Clone(state)
	flippedState[len(flippedState)/2] ^= 0x01
	garbage := bytes.Repeat([]byte("not a bbolt file "), len(state)/17+1)[:len(state)]
	wrongCounts := meta
	wrongCounts.Counts.Instances++
	wc := metaJSON(t, wrongCounts, 0)
	v2 := metaJSON(t, meta, 2)
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0xff

	cases := []struct {
		name    string
		archive []byte
		field   string
		message string
	}{
		{"truncated", good[:len(good)/2], "snapshot", "truncated"},
		{"flipped byte", flipped, "snapshot", "corrupt"},
		{"not gzip", []byte("PUT me, I am a snapshot, honest"), "snapshot", "not a gzip stream"},
		{"empty", nil, "snapshot", "empty input"},
		{"wrong format version",
			buildArchive(t, []member{{"meta.json", v2}, {"state.db", state}, {"SHA256SUMS", sums(v2, state)}}),
			"meta.json", "format version 2 is not supported"},
		{"extra member",
			buildArchive(t, []member{{"meta.json", mj}, {"state.db", state}, {"SHA256SUMS", sums(mj, state)}, {"notes.txt", []byte("hi")}}),
			"notes.txt", "unexpected member"},
		{"missing member",
			buildArchive(t, []member{{"meta.json", mj}, {"state.db", state}}),
			"SHA256SUMS", "missing"},
		{"state.db altered",
			buildArchive(t, []member{{"meta.json", mj}, {"state.db", flippedState}, {"SHA256SUMS", sums(mj, state)}}),
			"state.db", "checksum mismatch"},
		{"state.db not a state file",
			buildArchive(t, []member{{"meta.json", mj}, {"state.db", garbage}, {"SHA256SUMS", sums(mj, garbage)}}),
			"state.db", "rejected by the state check"},
		{"counts disagree",
			buildArchive(t, []member{{"meta.json", wc}, {"state.db", state}, {"SHA256SUMS", sums(wc, state)}}),
			"state.db", "meta.json says"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Alternate between the leader and a follower (which forwards the body).
			nd := c.Nodes[leader]
			if i%2 == 1 {
				nd = c.Nodes[c.Followers()[0]]
			}
			err := nd.Client().RestoreSnapshot(ctx, bytes.NewReader(tc.archive))
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("restore of a bad archive: %v, want a 400", err)
			}
			if apiErr.Status != http.StatusBadRequest || apiErr.Code != api.CodeInvalid || apiErr.Field != tc.field ||
				!strings.Contains(apiErr.Message, tc.message) || !strings.Contains(apiErr.Message, "invalid snapshot archive") {
				t.Fatalf("got %d %s field %q: %q; want 400 %s field %q with %q", apiErr.Status, apiErr.Code,
					apiErr.Field, apiErr.Message, api.CodeInvalid, tc.field, tc.message)
			}
			if diff := captureState(t, c).unchangedSince(before); diff != "" {
				t.Fatalf("a refused restore changed the cluster: %s", diff)
			}
		})
	}
	// Nothing is left in the upload directories.
	for _, nd := range c.Nodes {
		entries, err := os.ReadDir(nd.DataDir + "/snapshot-tmp")
		noErr(t, err)
		if len(entries) != 0 {
			t.Errorf("node %s: %d files left in snapshot-tmp", nd.ID, len(entries))
		}
	}
}

// An archive over the configured limit is a 413, whatever the 1 MiB API limit says.
func TestSnapshot_ArchiveOverLimitIs413(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 60*time.Second)
	leader := c.MustLeader()
	good, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)

	small := servertest.New(t, 1, servertest.FastTimeouts(), func(cfg *server.Config) {
		cfg.Snapshot.MaxBytes = int64(len(good) - 1)
	})
	small.MustLeader()
	err := small.Nodes[0].Client().RestoreSnapshot(ctx, bytes.NewReader(good))
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("archive over the limit: %v, want 413", err)
	}
}

// blockingReader yields data, then blocks until release is closed, then yields rest.
type blockingReader struct {
	data, rest []byte
	reached    chan struct{} // closed when data is consumed
	release    chan struct{}
	once       bool
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	if !b.once {
		b.once = true
		close(b.reached)
		<-b.release
	}
	if len(b.rest) > 0 {
		n := copy(p, b.rest)
		b.rest = b.rest[n:]
		return n, nil
	}
	return 0, io.EOF
}

// An upload still arriving holds no lock: while the first restore's upload is stalled
// half-way through a follower, a bad archive is judged on its merits (400) and a second,
// complete archive is restored. The first, once it arrives whole, is then restored too.
func TestSnapshot_IncompleteUploadHoldsNoLock(t *testing.T) {
	c := newSnapshotCluster(t)
	ctx := ctxT(t, 90*time.Second)
	leader := c.MustLeader()
	// Random metadata keeps the archive large, so that its first half holds the
	// beginning of state.db.
	last := max(fill(ctx, t, c.Nodes[leader].Client(), checkTarget(t)), fillBulk(ctx, t, c.Nodes[leader].Client(), 150))
	noErr(t, c.WaitApplied(ctx, last))
	first, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	wantFirst := logicalOf(dump(t, c.Nodes[leader]))
	wrote(t)(c.Nodes[leader].Client().UpsertNamespace(ctx, "second", api.NamespaceRequest{}))
	c.WaitSettled()
	second, _, _ := save(ctx, t, c.Nodes[leader].Client(), false)
	wantSecond := logicalOf(dump(t, c.Nodes[leader]))
	wrote(t)(c.Nodes[leader].Client().UpsertNamespace(ctx, "after-save", api.NamespaceRequest{}))

	fs := c.Followers()
	body := &blockingReader{data: first[:len(first)/2], rest: first[len(first)/2:],
		reached: make(chan struct{}), release: make(chan struct{})}
	firstDone := make(chan error, 1)
	go func() { firstDone <- c.Nodes[fs[0]].Client().RestoreSnapshot(ctx, body) }()
	// The leader is extracting the first archive's state.db: the upload is under way.
	tmp := c.Nodes[leader].DataDir + "/snapshot-tmp"
	wait.For(t, 30*time.Second, "the first upload to reach the leader's disk", func() bool {
		entries, err := os.ReadDir(tmp)
		noErr(t, err)
		return len(entries) > 0
	})

	err := c.Nodes[fs[1]].Client().RestoreSnapshot(ctx, bytes.NewReader([]byte("not an archive")))
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("a bad archive while another upload is under way: %v, want 400", err)
	}
	if err := c.Nodes[leader].Client().RestoreSnapshot(ctx, bytes.NewReader(second)); err != nil {
		t.Fatalf("a complete archive while another upload is under way: %v, want it restored", err)
	}
	waitLogical(t, c, wantSecond, same)

	close(body.release)
	if err := <-firstDone; err != nil {
		t.Fatalf("first restore: %v", err)
	}
	waitLogical(t, c, wantFirst, same)
}
