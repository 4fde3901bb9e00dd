package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/server"
	"github.com/rosterhq/roster/server/servertest"
	"github.com/rosterhq/roster/snapshot"
)

// steadyTimeouts are hashicorp/raft's default timers: under the race detector on a busy
// machine the tests' fast ones can depose leaders in the middle of a test.
func steadyTimeouts(c *server.Config) {
	c.Raft.HeartbeatTimeout = time.Second
	c.Raft.ElectionTimeout = time.Second
	c.Raft.LeaderLeaseTimeout = 500 * time.Millisecond
}

func cliCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func registerN(ctx context.Context, t *testing.T, c *client.Client, svc string, n int) uint64 {
	t.Helper()
	// A NONE-checked cluster: the leader's prober leaves these instances alone.
	if _, err := c.UpsertCluster(ctx, "", "", svc, "DEFAULT", api.ClusterRequest{HealthCheck: &api.HealthCheckSpec{Type: "NONE"}}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range n {
		idx, err := c.RegisterInstance(ctx, "", "", svc, "127.100.0.1", 1000+i, api.InstanceRequest{Metadata: map[string]string{"i": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	return last
}

func instanceCount(ctx context.Context, t *testing.T, c *client.Client, svc string) int {
	t.Helper()
	resp, _, err := c.Instances(ctx, "", "", svc, client.InstancesQuery{})
	if client.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Instances)
}

// save writes a verified archive and renames it into place; inspect reads it offline
// (table and JSON); restore brings the saved state back.
func TestSnapshotCLI_SaveInspectRestore(t *testing.T) {
	c := servertest.New(t, 3, steadyTimeouts)
	leader := c.MustLeader()
	ctx := cliCtx(t)
	lc := c.Nodes[leader].Client()
	last := registerN(ctx, t, lc, "orders", 5)
	if err := c.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	follower := c.Nodes[c.Followers()[0]].HTTPAddr
	file := filepath.Join(t.TempDir(), "backup.snap")

	r := runCLI(t, nil, "snapshot", "save", file, "--addr", follower)
	wantExit(t, r, 0)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("saved file: %v", err)
	}
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	for _, want := range []string{"Instances       5", "Services        1", "Roster version  " + buildinfo.Get().Version, file} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("save output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runCLI(t, nil, "snapshot", "inspect", file, "-o", "json")
	wantExit(t, r, 0)
	var rep archiveReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v\n%s", err, r.stdout)
	}
	if !rep.Verified || rep.Counts.Instances != 5 || rep.Counts.Namespaces != 1 || rep.Index < last ||
		rep.RosterVersion != buildinfo.Get().Version || rep.FormatVersion != 1 || rep.StateBytes == 0 || rep.ArchiveBytes == 0 {
		t.Fatalf("inspect report %+v", rep)
	}
	r = runCLI(t, nil, "snapshot", "inspect", file)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "Index           "+strconv.FormatUint(rep.Index, 10)) {
		t.Fatalf("inspect table:\n%s", r.stdout)
	}

	// Change the cluster, then restore through a follower.
	registerN(ctx, t, lc, "payments", 3)
	if _, err := lc.DeregisterInstance(ctx, "", "", "orders", "127.100.0.1", 1000); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "snapshot", "restore", file, "--addr", follower)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "restored "+file) || !strings.Contains(r.stdout, "ACL tokens: the cluster's") {
		t.Fatalf("restore output %q", r.stdout)
	}
	r = runCLI(t, nil, "snapshot", "restore", file, "--addr", follower, "--acl", "mine")
	wantExit(t, r, 2)
	if !strings.Contains(r.stderr, `--acl must be "cluster" or "archive"`) {
		t.Fatalf("restore --acl mine: %q", r.stderr)
	}
	if n := instanceCount(ctx, t, lc, "orders"); n != 5 {
		t.Fatalf("orders has %d instances after the restore, want 5", n)
	}
	if n := instanceCount(ctx, t, lc, "payments"); n != 0 {
		t.Fatalf("payments has %d instances after the restore, want 0", n)
	}
}

// inspect works offline on a file and exits 1 with the reason on a bad archive.
func TestSnapshotCLI_InspectBadArchive(t *testing.T) {
	dir := t.TempDir()
	notGzip := filepath.Join(dir, "plain.snap")
	if err := os.WriteFile(notGzip, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "snapshot", "inspect", notGzip)
	wantExit(t, r, 1)
	if !strings.HasPrefix(r.stderr, "roster: invalid snapshot archive: not a gzip stream") {
		t.Fatalf("stderr %q", r.stderr)
	}

	// A real archive, truncated.
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	good := filepath.Join(dir, "good.snap")
	wantExit(t, runCLI(t, nil, "snapshot", "save", good, "--addr", c.Nodes[0].HTTPAddr), 0)
	c.Close()
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.snap")
	if err := os.WriteFile(cut, data[:len(data)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "snapshot", "inspect", cut, "-o", "json")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "invalid snapshot archive") || !strings.Contains(r.stderr, "truncated") || r.stdout != "" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	// The good one still inspects fine with no node running.
	wantExit(t, runCLI(t, nil, "snapshot", "inspect", good), 0)
	wantExit(t, runCLI(t, nil, "snapshot", "inspect", filepath.Join(dir, "missing.snap")), 1)
}

// A failed save leaves neither a temporary file nor a changed FILE behind.
func TestSnapshotCLI_FailedSaveKeepsExistingFile(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"GET /v1/snapshot": {status: 200, body: "this is not an archive"},
	})
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, []byte("previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "snapshot", "save", file, "--addr", f.addr())
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "failed verification") || !strings.Contains(r.stderr, "not a gzip stream") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "previous backup" {
		t.Fatalf("FILE changed to %q", b)
	}
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}

	r = runCLI(t, nil, "snapshot", "save", file, "--addr", "127.0.0.1:1")
	wantExit(t, r, 1)
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind after a connection error: %v", err)
	}
}

// restore checks the file locally and sends nothing when it is damaged; a server's
// refusal is reported with its message.
func TestSnapshotCLI_RestoreRefusals(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{
		"PUT /v1/snapshot": {status: 409, body: `{"error":{"code":"conflict","message":"another snapshot restore is in progress"}}`},
	})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.snap")
	if err := os.WriteFile(bad, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "snapshot", "restore", bad, "--addr", f.addr())
	wantExit(t, r, 1)
	if f.callCount() != 0 || !strings.Contains(r.stderr, "not a gzip stream") {
		t.Fatalf("calls %d, stderr %q", f.callCount(), r.stderr)
	}

	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	good := filepath.Join(dir, "good.snap")
	wantExit(t, runCLI(t, nil, "snapshot", "save", good, "--addr", c.Nodes[0].HTTPAddr), 0)
	r = runCLI(t, nil, "snapshot", "restore", good, "--addr", f.addr())
	wantExit(t, r, 1)
	if f.callCount() != 1 || !strings.Contains(r.stderr, "another snapshot restore is in progress") ||
		!strings.Contains(r.stderr, "wait for the running restore") {
		t.Fatalf("calls %d, stderr %q", f.callCount(), r.stderr)
	}
}

// recover refuses a running node, and rewrites a stopped one's configuration.
func TestRecoverCLI_RefusesRunningNodeThenRecovers(t *testing.T) {
	c := servertest.New(t, 1, servertest.FastTimeouts())
	c.MustLeader()
	ctx := cliCtx(t)
	nd := c.Nodes[0]
	registerN(ctx, t, nd.Client(), "orders", 2)
	peers := nd.ID + "=" + nd.RaftAddr

	r := runCLI(t, nil, "recover", "--data-dir", nd.DataDir, "--peers", peers)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "node appears to be running") {
		t.Fatalf("stderr %q", r.stderr)
	}
	wantExit(t, runCLI(t, nil, "recover", "--data-dir", nd.DataDir), exitUsage)
	wantExit(t, runCLI(t, nil, "recover", "--peers", peers), exitUsage)

	c.Stop(0)
	r = runCLI(t, map[string]string{"ROSTER_DATA_DIR": nd.DataDir}, "recover", "--peers", peers)
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "recovered "+nd.DataDir) {
		t.Fatalf("stdout %q", r.stdout)
	}
	c.Start(0)
	c.MustLeader()
	if n := instanceCount(ctx, t, nd.Client(), "orders"); n != 2 {
		t.Fatalf("%d instances after recovery, want 2", n)
	}
}

// writeRawArchive writes an archive of metaJSON and state to a file, laid out as
// snapshot.Write does but without its checks, and returns the file's path.
func writeRawArchive(t *testing.T, dir, name, metaJSON string, state []byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	sums := fmt.Sprintf("%x  meta.json\n%x  state.db\n", sha256.Sum256([]byte(metaJSON)), sha256.Sum256(state))
	for _, m := range []struct {
		name string
		body []byte
	}{{"meta.json", []byte(metaJSON)}, {"state.db", state}, {"SHA256SUMS", []byte(sums)}} {
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
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspect refuses an archive whose meta.json holds a number beyond the format's limits
// (an index near 2^64 passed it before, and wedged the cluster it was restored into),
// and a gzip bomb before extracting it; restore refuses both without contacting the
// node.
func TestSnapshotCLI_RefusesNumbersBeyondLimitsAndBombs(t *testing.T) {
	f := newFakeAPI(t, map[string]fakeRoute{"PUT /v1/snapshot": {status: 200, body: `{"index":1}`}})
	dir := t.TempDir()
	const meta = `{"formatVersion":1,"index":%s,"term":%s,"rosterVersion":"v1","createdAt":"2026-01-01T00:00:00Z","size":5,` +
		`"counts":{"namespaces":0,"services":0,"instances":0}}`
	for _, tc := range []struct {
		name, index, term, want string
	}{
		{"index", "18446744073709551615", "1", `meta.json: field "index" is 18446744073709551615, above the limit of 9007199254740991`},
		{"index-2^63", "9223372036854775808", "1", `meta.json: field "index" is 9223372036854775808, above the limit`},
		{"term", "7", "18446744073709551615", `meta.json: field "term" is 18446744073709551615, above the limit`},
	} {
		file := writeRawArchive(t, dir, tc.name+".snap", fmt.Sprintf(meta, tc.index, tc.term), []byte("state"))
		r := runCLI(t, nil, "snapshot", "inspect", file)
		wantExit(t, r, 1)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("inspect %s: stderr %q, want %q", tc.name, r.stderr, tc.want)
		}
		wantExit(t, runCLI(t, nil, "snapshot", "restore", file, "--addr", f.addr()), 1)
	}

	var bomb bytes.Buffer
	const size = 16 << 20
	if err := snapshot.Write(&bomb, snapshot.Meta{Index: 1, Term: 1}, io.LimitReader(zeroReader{}, size), size); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "bomb.snap")
	if err := os.WriteFile(file, bomb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	r := runCLI(t, map[string]string{"TMPDIR": tmp}, "snapshot", "inspect", file)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "state.db: is 16777216 bytes, more than 256 times the") {
		t.Errorf("inspect bomb: stderr %q", r.stderr)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("inspect left %d files in $TMPDIR", len(entries))
	}
	wantExit(t, runCLI(t, nil, "snapshot", "restore", file, "--addr", f.addr()), 1)
	if n := f.callCount(); n != 0 {
		t.Fatalf("restore sent %d requests for archives it should refuse", n)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
