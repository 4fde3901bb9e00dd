package httpapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/wait"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/snapshot"
)

// rebuildArchive unpacks a valid archive, lets edit change its meta.json (decoded as a
// generic object, so that any value can be written), and packs it again with matching
// checksums, the way snapshot.Write lays an archive out.
func rebuildArchive(t *testing.T, archive []byte, edit func(meta map[string]any)) []byte {
	t.Helper()
	ar, err := snapshot.Read(bytes.NewReader(archive), snapshot.ReadOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ar.Close() }()
	state, err := os.ReadFile(ar.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ar.Meta)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var meta map[string]any
	if err := dec.Decode(&meta); err != nil {
		t.Fatal(err)
	}
	edit(meta)
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	sums := fmt.Appendf(nil, "%x  meta.json\n%x  state.db\n", sha256.Sum256(metaJSON), sha256.Sum256(state))
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, m := range []struct {
		name string
		body []byte
	}{{"meta.json", metaJSON}, {"state.db", state}, {"SHA256SUMS", sums}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: m.name, Size: int64(len(m.body)), Mode: 0o600}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombArchive returns a well-formed archive whose state.db is size zero bytes: about
// 1,000 times its own size, the expansion of a gzip bomb.
func bombArchive(t *testing.T, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	meta := snapshot.Meta{Index: 9, Term: 3, Counts: snapshot.Counts{Namespaces: 1}}
	if err := snapshot.Write(&buf, meta, io.LimitReader(zeroReader{}, size), size); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// largeArchive returns an archive of a state with about 600 KiB of random metadata:
// large enough that half of it holds meta.json and the beginning of state.db.
func largeArchive(t *testing.T) []byte {
	t.Helper()
	src := newFakeSnapshots(t)
	for i := range 700 {
		blob := make([]byte, 450)
		_, _ = rand.Read(blob)
		if err := src.st.RegisterInstance(uint64(100+i), model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
			Service: "bulk", IP: "127.101.0.1", Port: 1 + i, Cluster: "DEFAULT", Weight: 1, Enabled: true,
			Metadata: map[string]string{"b": string(bytesToHex(blob))}}); err != nil {
			t.Fatal(err)
		}
	}
	src.index = 5000
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("src"), src, t)))
	resp, _ := getArchive(t, srv.URL+"/v1/snapshot")
	return resp.Body
}

// stallingBody yields head, then blocks until release is closed or the test ends, then
// yields tail.
type stallingBody struct {
	head, tail []byte
	release    chan struct{}
	done       <-chan struct{}
}

func newStallingBody(t *testing.T, archive []byte) *stallingBody {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &stallingBody{head: archive[:len(archive)/2], tail: archive[len(archive)/2:], release: make(chan struct{}), done: ctx.Done()}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	select {
	case <-b.release:
	case <-b.done:
		return 0, errors.New("test over")
	}
	if len(b.tail) > 0 {
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

// putAsync sends PUT /v1/snapshot with body (its length unknown: chunked) and delivers
// the answer on the returned channel.
func putAsync(t *testing.T, url string, body io.Reader) <-chan response {
	t.Helper()
	ch := make(chan response, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPut, url+"/v1/snapshot", body)
		if err != nil {
			ch <- response{}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- response{Body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- response{Code: resp.StatusCode, Header: resp.Header, Body: b}
	}()
	return ch
}

// answer waits for an answer of putAsync.
func answer(t *testing.T, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no answer within 60s")
		return response{}
	}
}

// hasRestoreFile reports whether dir holds a state.db being extracted.
func hasRestoreFile(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
	}
	return len(entries) > 0
}

func mustBeEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in %s: %s", dir, e.Name())
	}
}

// An upload that is still arriving holds nothing: another restore, received whole and
// verified meanwhile, goes through. The stalled upload is cut off once it sent nothing
// for UploadIdleTimeout (408), and leaves nothing behind.
func TestSnapshotPut_IncompleteUploadHoldsNoLockAndStallIsCutOff(t *testing.T) {
	archive := largeArchive(t)
	snaps := newFakeSnapshots(t)
	cfg := snapshotConfig(newLeaderNode("n1"), snaps, t)
	cfg.Snapshot.UploadIdleTimeout = 3 * time.Second
	srv := newRecordingServer(t, mustNew(t, cfg))

	body := newStallingBody(t, archive)
	first := putAsync(t, srv.URL, body)
	wait.For(t, 20*time.Second, "the first upload to reach the state.db", func() bool {
		return hasRestoreFile(t, cfg.Snapshot.Dir)
	})
	second := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", archive, nil)
	if second.Code != http.StatusOK {
		t.Fatalf("a complete restore while another upload stalls: %d %s, want 200", second.Code, second.Body)
	}
	if n := len(snaps.calls()); n != 1 {
		t.Fatalf("%d restores, want 1", n)
	}

	r := answer(t, first)
	eb := r.errorBody(t)
	if r.Code != http.StatusRequestTimeout || eb.Code != api.CodeTimeout || !strings.Contains(eb.Message, "the snapshot upload stalled: nothing arrived for 3s") {
		t.Fatalf("stalled upload: %d %+v, want 408 %s", r.Code, eb, api.CodeTimeout)
	}
	if n := len(snaps.calls()); n != 1 {
		t.Fatalf("%d restores after the stalled upload, want 1", n)
	}
	mustBeEmptyDir(t, cfg.Snapshot.Dir)
}

// A follower paces the client it streams to the leader: a client that stalls is cut off
// by the follower (408), and the leader, whose upload ends with it, keeps nothing.
func TestSnapshotPut_FollowerCutsOffStalledClient(t *testing.T) {
	archive := largeArchive(t)
	leaderSnaps := newFakeSnapshots(t)
	leaderNode := newLeaderNode("n1")
	leaderCfg := snapshotConfig(leaderNode, leaderSnaps, t)
	leaderSrv := newRecordingServer(t, mustNew(t, leaderCfg))
	leaderNode.setLeader(true, leaderSrv.member("n1"))
	followerCfg := snapshotConfig(newFollowerNode("n2", leaderSrv.member("n1")), nil, t)
	followerCfg.Snapshot.UploadIdleTimeout = time.Second
	srv := newRecordingServer(t, mustNew(t, followerCfg))

	r := answer(t, putAsync(t, srv.URL, newStallingBody(t, archive)))
	eb := r.errorBody(t)
	if r.Code != http.StatusRequestTimeout || eb.Code != api.CodeTimeout || !strings.Contains(eb.Message, "stalled") {
		t.Fatalf("stalled upload through a follower: %d %+v, want 408", r.Code, eb)
	}
	wait.For(t, 20*time.Second, "the leader to drop the partial upload", func() bool {
		return !hasRestoreFile(t, leaderCfg.Snapshot.Dir)
	})
	if n := len(leaderSnaps.calls()); n != 0 {
		t.Fatalf("%d restores of a stalled upload", n)
	}
}

// A follower passes on the leader's answer at once when the leader answers before the
// upload ended, even while the client stalls: here the leader cuts the forwarded
// upload off after 300 ms and the follower, whose own limit is a minute, answers with
// it. (The follower used to lift its read deadline when its handler returned, while
// its forwarding still read the client's body; net/http's response waited for that
// read, and the client waited until it gave up.)
func TestSnapshotPut_FollowerAnswersWhenTheLeaderAnswersFirst(t *testing.T) {
	archive := largeArchive(t)
	leaderSnaps := newFakeSnapshots(t)
	leaderNode := newLeaderNode("n1")
	leaderCfg := snapshotConfig(leaderNode, leaderSnaps, t)
	leaderCfg.Snapshot.UploadIdleTimeout = 300 * time.Millisecond
	leaderSrv := newRecordingServer(t, mustNew(t, leaderCfg))
	leaderNode.setLeader(true, leaderSrv.member("n1"))
	followerCfg := snapshotConfig(newFollowerNode("n2", leaderSrv.member("n1")), nil, t)
	followerCfg.Snapshot.UploadIdleTimeout = time.Minute
	srv := newRecordingServer(t, mustNew(t, followerCfg))

	start := time.Now()
	ch := putAsync(t, srv.URL, newStallingBody(t, archive))
	var r response
	select {
	case r = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("the follower did not pass on the leader's answer within 20s")
	}
	eb := r.errorBody(t)
	if r.Code != http.StatusRequestTimeout || !strings.Contains(eb.Message, "nothing arrived for 300ms") {
		t.Fatalf("upload through a follower, cut off by the leader: %d %+v, want the leader's 408", r.Code, eb)
	}
	t.Logf("answered after %v", time.Since(start).Round(time.Millisecond))
	if n := len(leaderSnaps.calls()); n != 0 {
		t.Fatalf("%d restores of a stalled upload", n)
	}
}

// fakeDeadlines records the deadlines a pacedBody sets.
type fakeDeadlines struct{ set []time.Time }

func (f *fakeDeadlines) SetReadDeadline(t time.Time) error {
	f.set = append(f.set, t)
	return nil
}

// trickle yields one byte per read, each a second after the previous one on clock.
type trickle struct{ clock *time.Time }

func (r trickle) Read(p []byte) (int, error) {
	*r.clock = r.clock.Add(time.Second)
	p[0] = 'x'
	return 1, nil
}

// timeoutBody fails every read as a connection whose deadline passed.
type timeoutBody struct{}

func (timeoutBody) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }

// TestPacedBody checks the pacing of uploads: every read has a deadline of at most the
// idle timeout; after the first idle period, the average rate must stay above the
// minimum, so that a client trickling a byte at a time is cut off; a read that times
// out is reported as a stall; after the end of the body, the deadline is lifted.
func TestPacedBody(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dl := &fakeDeadlines{}
	p := &pacedBody{body: io.NopCloser(trickle{&clock}), rc: dl, idle: 10 * time.Second, minRate: 100,
		now: func() time.Time { return clock }, start: clock}
	start := clock
	buf := make([]byte, 8)
	var err error
	reads := 0
	for err == nil && reads < 100 {
		_, err = p.Read(buf)
		reads++
	}
	var slow *uploadTooSlow
	if !errors.As(err, &slow) || slow.stalled || !strings.Contains(err.Error(), "below the minimum average of 100 bytes/s expected after the first 10s") {
		t.Fatalf("after %d reads: %v, want a refusal for the rate", reads, err)
	}
	// At one byte a second, the 11th second is the first with fewer than 100 bytes for
	// each second after the first 10.
	if elapsed := clock.Sub(start); elapsed < 10*time.Second || elapsed > 11*time.Second {
		t.Errorf("cut off after %v, want just after the first 10s", elapsed)
	}
	if dl.set[0] != start.Add(10*time.Second) {
		t.Errorf("first deadline %v, want start + 10s", dl.set[0].Sub(start))
	}
	if _, again := p.Read(buf); again != err {
		t.Errorf("a read after the cut: %v", again)
	}

	p = &pacedBody{body: io.NopCloser(timeoutBody{}), rc: dl, idle: 10 * time.Second, minRate: 100, now: time.Now, start: time.Now()}
	_, err = p.Read(buf)
	if !errors.As(err, &slow) || !slow.stalled || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want a stall", err)
	}

	dl.set = nil
	p = &pacedBody{body: io.NopCloser(strings.NewReader("abc")), rc: dl, idle: 10 * time.Second, minRate: 100, now: time.Now, start: time.Now()}
	if b, err := io.ReadAll(p); err != nil || string(b) != "abc" {
		t.Fatalf("ReadAll: %q, %v", b, err)
	}
	if last := dl.set[len(dl.set)-1]; !last.IsZero() {
		t.Errorf("deadline left at %v after the body ended", last)
	}
}

// A gzip bomb is refused before it fills the disk: with the upload's length known,
// before anything is written; streamed, once what it wrote outgrows 256 times what
// arrived. Either way the answer is a 400 naming state.db, and nothing is left.
func TestSnapshotPut_GzipBombIs400(t *testing.T) {
	snaps := newFakeSnapshots(t)
	cfg := snapshotConfig(newLeaderNode("n1"), snaps, t)
	srv := newRecordingServer(t, mustNew(t, cfg))
	bomb := bombArchive(t, 64<<20)

	known := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", bomb, nil)
	streamed := answer(t, putAsync(t, srv.URL, io.MultiReader(bytes.NewReader(bomb))))
	for _, c := range []struct {
		name string
		r    response
		want string
	}{
		{"length known", known, "state.db: is 67108864 bytes, more than 256 times the"},
		{"streamed", streamed, "state.db: is 67108864 bytes and expands more than 256 times"},
	} {
		eb := c.r.errorBody(t)
		if c.r.Code != http.StatusBadRequest || eb.Field != "state.db" || !strings.Contains(eb.Message, c.want) {
			t.Errorf("%s: %d %+v, want 400 state.db %q", c.name, c.r.Code, eb, c.want)
		}
	}
	if n := len(snaps.calls()); n != 0 {
		t.Fatalf("%d restores of a bomb", n)
	}
	mustBeEmptyDir(t, cfg.Snapshot.Dir)
}

// Errors of the node's disk are answered without the node's paths: an archive that does
// not fit beyond the reserve is a 413 saying how much is needed; a disk error a 500
// whose details stay in the log.
func TestSnapshotPut_DiskErrorsNameNoPath(t *testing.T) {
	good, _ := getArchive(t, newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("src"), newFakeSnapshots(t), t))).URL+"/v1/snapshot")
	parent := t.TempDir()
	dir := filepath.Join(parent, "var-lib-roster", "snapshot-tmp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	snaps := newFakeSnapshots(t)
	cfg := snapshotConfig(newLeaderNode("n1"), snaps, t)
	cfg.Snapshot.Dir = dir
	cfg.Snapshot.MinFreeBytes = 1 << 60
	full := newRecordingServer(t, mustNew(t, cfg))
	r := doHTTP(t, http.MethodPut, full.URL+"/v1/snapshot", good.Body, nil)
	eb := r.errorBody(t)
	if r.Code != http.StatusRequestEntityTooLarge || eb.Code != api.CodeTooLarge || !strings.Contains(eb.Message, "not enough free disk space") ||
		!strings.Contains(eb.Message, "bytes are needed") {
		t.Errorf("no room beyond the reserve: %d %+v, want 413", r.Code, eb)
	}
	if strings.Contains(string(r.Body), "var-lib-roster") || strings.Contains(string(r.Body), parent) {
		t.Errorf("the answer names a server path: %s", r.Body)
	}

	// The upload directory gone (the space check fails), or replaced by a file (the
	// space check passes, creating the temporary file fails).
	cfg.Snapshot.MinFreeBytes = 0
	broken := newRecordingServer(t, mustNew(t, cfg))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"gone", "a file"} {
		if what == "a file" {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r = doHTTP(t, http.MethodPut, broken.URL+"/v1/snapshot", good.Body, nil)
		eb = r.errorBody(t)
		if r.Code != http.StatusInternalServerError || eb.Code != api.CodeInternal || !strings.Contains(eb.Message, "snapshot restore failed on node n1") {
			t.Errorf("upload directory %s: %d %+v, want 500", what, r.Code, eb)
		}
		if strings.Contains(string(r.Body), "var-lib-roster") || strings.Contains(string(r.Body), parent) {
			t.Errorf("upload directory %s: the answer names a server path: %s", what, r.Body)
		}
	}
	if n := len(snaps.calls()); n != 0 {
		t.Fatalf("%d restores", n)
	}
}

// An archive whose meta.json holds a number beyond the format's limits (an index near
// 2^64, which would wrap Raft's log around) is a 400 naming meta.json and the field,
// and is not handed to Raft.
func TestSnapshotPut_NumbersBeyondLimitsAre400(t *testing.T) {
	snaps := newFakeSnapshots(t)
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("n1"), snaps, t)))
	good, _ := getArchive(t, srv.URL+"/v1/snapshot")
	for _, c := range []struct {
		field string
		value any
	}{
		{"index", json.Number("18446744073709551615")},
		{"index", json.Number("9223372036854775807")},
		{"term", json.Number("18446744073709551615")},
		{"createdAt", "9999-12-31T23:59:59Z"},
	} {
		archive := rebuildArchive(t, good.Body, func(m map[string]any) { m[c.field] = c.value })
		r := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", archive, nil)
		eb := r.errorBody(t)
		if r.Code != http.StatusBadRequest || eb.Code != api.CodeInvalid || eb.Field != "meta.json" ||
			!strings.Contains(eb.Message, fmt.Sprintf("field %q is %v", c.field, c.value)) {
			t.Errorf("%s %v: %d %+v, want 400 naming meta.json and the field", c.field, c.value, r.Code, eb)
		}
	}
	if n := len(snaps.calls()); n != 0 {
		t.Fatalf("%d restores of archives beyond the limits", n)
	}
}
