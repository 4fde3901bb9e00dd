package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/internal/storetest"
	"github.com/rosterhq/roster/model"
	"github.com/rosterhq/roster/raftnode"
	"github.com/rosterhq/roster/snapshot"
	"github.com/rosterhq/roster/store"
)

// fakeSnapshots serves views of a real store at a fixed position and records restores.
type fakeSnapshots struct {
	st          *store.Store
	index, term uint64

	mu       sync.Mutex
	restores []restoreCall
	// started, when set, is closed by RestoreState once it read the state; gate, when
	// set, is then waited on.
	started, gate chan struct{}
}

type restoreCall struct {
	index, term uint64
	size        int64
	state       []byte
}

func newFakeSnapshots(t *testing.T) *fakeSnapshots {
	t.Helper()
	st := storetest.Open(t)
	if err := st.RegisterInstance(7, model.Instance{Namespace: "public", Group: "DEFAULT_GROUP", Service: "orders",
		IP: "127.100.0.1", Port: 80, Cluster: "DEFAULT", Weight: 1, Enabled: true, Healthy: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(tx *store.Txn) error { return tx.SetAppliedIndex(7) }); err != nil {
		t.Fatal(err)
	}
	return &fakeSnapshots{st: st, index: 9, term: 3}
}

func (f *fakeSnapshots) SnapshotState() (*raftnode.StateSnapshot, error) {
	sn, err := f.st.Snapshot()
	if err != nil {
		return nil, err
	}
	return &raftnode.StateSnapshot{Snapshot: sn, Index: f.index, Term: f.term}, nil
}

func (f *fakeSnapshots) AdoptIdentity(string, bool) (bool, error) { return false, nil }

func (f *fakeSnapshots) RestoreState(_ context.Context, index, term uint64, r io.Reader, size int64) (uint64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	if f.started != nil {
		close(f.started)
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, restoreCall{index, term, size, b})
	return 1000, nil
}

func (f *fakeSnapshots) calls() []restoreCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]restoreCall(nil), f.restores...)
}

func snapshotConfig(node testNode, snaps Snapshotter, t *testing.T) Config {
	cfg := testConfig(node, seededReader())
	cfg.Version = "v1.2.3-test"
	cfg.Snapshot = SnapshotConfig{Node: snaps, Dir: t.TempDir()}
	return cfg
}

// getArchive downloads and checks an archive from h.
func getArchive(t *testing.T, url string) (response, snapshot.Meta) {
	t.Helper()
	resp := doHTTP(t, http.MethodGet, url, nil, nil)
	if resp.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.Code, resp.Body)
	}
	meta, err := snapshot.Inspect(bytes.NewReader(resp.Body), snapshot.ReadOptions{Dir: t.TempDir(), Check: snapshot.CheckState})
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	return resp, meta
}

func TestSnapshotGet_StreamsACheckedArchive(t *testing.T) {
	snaps := newFakeSnapshots(t)
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("n1"), snaps, t)))
	resp, meta := getArchive(t, srv.URL+"/v1/snapshot")
	if ct := resp.Header.Get("Content-Type"); ct != "application/gzip" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="roster-9.snap"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	if resp.Header.Get(api.HeaderIndex) != "9" {
		t.Errorf("X-Roster-Index %q", resp.Header.Get(api.HeaderIndex))
	}
	want := snapshot.Counts{Namespaces: 1, Services: 1, Instances: 1}
	if meta.Index != 9 || meta.Term != 3 || meta.RosterVersion != "v1.2.3-test" || meta.Counts != want {
		t.Errorf("meta %+v", meta)
	}
}

func TestSnapshotGet_FollowerForwardsUnlessStale(t *testing.T) {
	leaderSnaps := newFakeSnapshots(t)
	leaderNode := newLeaderNode("n1")
	leaderSrv := newRecordingServer(t, mustNew(t, snapshotConfig(leaderNode, leaderSnaps, t)))
	leaderNode.setLeader(true, leaderSrv.member("n1"))

	followerSnaps := newFakeSnapshots(t)
	followerSnaps.index = 8
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(follower, followerSnaps, t)))

	resp, meta := getArchive(t, srv.URL+"/v1/snapshot")
	if resp.Header.Get(api.HeaderServedBy) != "n1" || meta.Index != 9 {
		t.Errorf("default: served by %q at %d, want the leader n1 at 9", resp.Header.Get(api.HeaderServedBy), meta.Index)
	}
	resp, meta = getArchive(t, srv.URL+"/v1/snapshot?consistency=stale")
	if resp.Header.Get(api.HeaderServedBy) != "n2" || meta.Index != 8 || len(leaderSrv.requests()) != 1 {
		t.Errorf("stale: served by %q at %d (leader saw %d requests)", resp.Header.Get(api.HeaderServedBy), meta.Index, len(leaderSrv.requests()))
	}
	bad := doHTTP(t, http.MethodGet, srv.URL+"/v1/snapshot?index=3", nil, nil)
	if bad.Code != http.StatusBadRequest || bad.errorBody(t).Field != "index" {
		t.Errorf("blocking snapshot: %d %s", bad.Code, bad.Body)
	}
}

// A restore body far above MaxBodyBytes passes through a follower, streamed, and
// reaches RestoreState whole, with the archive's position.
func TestSnapshotPut_LargeBodyForwardedAndRestored(t *testing.T) {
	// A state file with about 2 MiB of random metadata, so the archive stays large.
	src := newFakeSnapshots(t)
	for i := range 2200 {
		blob := make([]byte, 450)
		_, _ = rand.Read(blob)
		if err := src.st.RegisterInstance(uint64(100+i), model.Instance{Namespace: "public", Group: "DEFAULT_GROUP",
			Service: "bulk", IP: "127.101.0.1", Port: 1 + i, Cluster: "DEFAULT", Weight: 1, Enabled: true,
			Metadata: map[string]string{"b": strings.ToLower(string(bytesToHex(blob)))}}); err != nil {
			t.Fatal(err)
		}
	}
	src.index = 5000
	archiveSrv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("src"), src, t)))
	resp, meta := getArchive(t, archiveSrv.URL+"/v1/snapshot")
	archive := resp.Body
	if len(archive) <= 1<<20 {
		t.Fatalf("archive of %d bytes; the test needs more than 1 MiB", len(archive))
	}

	leaderSnaps := newFakeSnapshots(t)
	leaderNode := newLeaderNode("n1")
	leaderSrv := newRecordingServer(t, mustNew(t, snapshotConfig(leaderNode, leaderSnaps, t)))
	leaderNode.setLeader(true, leaderSrv.member("n1"))
	follower := newFollowerNode("n2", leaderSrv.member("n1"))
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(follower, nil, t)))

	put := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", archive, nil)
	if put.Code != http.StatusOK || put.Header.Get(api.HeaderIndex) != "1000" || put.Header.Get(api.HeaderServedBy) != "n1" {
		t.Fatalf("PUT: %d %s %v", put.Code, put.Body, put.Header)
	}
	calls := leaderSnaps.calls()
	if len(calls) != 1 || calls[0].index != meta.Index || calls[0].term != meta.Term || calls[0].size != meta.Size ||
		int64(len(calls[0].state)) != meta.Size {
		t.Fatalf("restore calls %+v, want index %d term %d size %d", calls, meta.Index, meta.Term, meta.Size)
	}
}

func bytesToHex(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

func TestSnapshotPut_BadArchiveIs400AndRestoresNothing(t *testing.T) {
	snaps := newFakeSnapshots(t)
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("n1"), snaps, t)))
	good, _ := getArchive(t, srv.URL+"/v1/snapshot")
	for _, tc := range []struct {
		body          []byte
		field, reason string
	}{
		{[]byte("nope"), "snapshot", "not a gzip stream"},
		{good.Body[:len(good.Body)-100], "snapshot", "truncated"},
	} {
		resp := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", tc.body, nil)
		eb := resp.errorBody(t)
		if resp.Code != http.StatusBadRequest || eb.Code != api.CodeInvalid || eb.Field != tc.field || !strings.Contains(eb.Message, tc.reason) {
			t.Errorf("got %d %+v, want 400 field %s with %q", resp.Code, eb, tc.field, tc.reason)
		}
	}
	if n := len(snaps.calls()); n != 0 {
		t.Fatalf("%d restores of bad archives", n)
	}
}

func TestSnapshotPut_SecondRestoreWhileOneRunsIs409(t *testing.T) {
	snaps := newFakeSnapshots(t)
	snaps.started, snaps.gate = make(chan struct{}), make(chan struct{})
	srv := newRecordingServer(t, mustNew(t, snapshotConfig(newLeaderNode("n1"), snaps, t)))
	good, _ := getArchive(t, srv.URL+"/v1/snapshot")
	first := make(chan int, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/snapshot", bytes.NewReader(good.Body))
		if err != nil {
			first <- 0
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-snaps.started // the first restore holds the guard until the gate opens
	resp := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", good.Body, nil)
	if eb := resp.errorBody(t); resp.Code != http.StatusConflict || eb.Code != api.CodeConflict {
		t.Fatalf("second restore: %d %+v", resp.Code, eb)
	}
	close(snaps.gate)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first restore: %d", code)
	}
	snaps.started = nil
	if r := doHTTP(t, http.MethodPut, srv.URL+"/v1/snapshot", good.Body, nil); r.Code != http.StatusOK {
		t.Fatalf("restore after the first ended: %d %s", r.Code, r.Body)
	}
}

func TestSnapshot_WithoutSnapshotterIs503(t *testing.T) {
	h := mustNew(t, testConfig(newLeaderNode("n1"), seededReader()))
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		if r := do(t, h, m, "/v1/snapshot", nil); r.Code != http.StatusServiceUnavailable {
			t.Errorf("%s: %d %s", m, r.Code, r.Body)
		}
	}
}
