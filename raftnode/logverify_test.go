package raftnode

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/internal/wait"
)

// mismatches records what a verifier reported.
type mismatches struct {
	mu   sync.Mutex
	errs []error
}

func (m *mismatches) add(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, err)
}

func (m *mismatches) list() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}

// verifierOn is a verifier over a fresh in-memory log (its cache and its disk at once),
// and the mismatches it reported.
func verifierOn(t *testing.T) (*logVerifier, *raft.InmemStore, *mismatches) {
	t.Helper()
	disk := raft.NewInmemStore()
	got := &mismatches{}
	v := newLogVerifier(disk, disk, newLogVerifyMetrics(), slog.New(slog.DiscardHandler), got.add)
	t.Cleanup(v.close)
	return v, disk, got
}

func commandEntry(t *testing.T, idx uint64, cmd fsm.Command) *raft.Log {
	t.Helper()
	b, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: b}
}

func results(v *logVerifier, result string) float64 {
	return testutil.ToFloat64(v.met.results.WithLabelValues(result))
}

// copyLogs is what a follower receives: the entries as the leader stored them.
func copyLogs(logs []*raft.Log) []*raft.Log {
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		c := *l
		c.Data = append([]byte(nil), l.Data...)
		c.Extensions = append([]byte(nil), l.Extensions...)
		out[i] = &c
	}
	return out
}

// The leader fills its checkpoint with the range since the last one and the checksum of
// what it wrote; it and a follower storing the same entries read them back and agree.
// A follower whose stored entry changed afterwards reports the mismatch once, naming the
// range, and counts it; later ranges start after the checkpoint.
func TestLogVerifier_CheckpointsCatchAnAlteredEntry(t *testing.T) {
	leader, _, leaderErrs := verifierOn(t)
	follower, followerDisk, followerErrs := verifierOn(t)

	batch := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf")},
		commandEntry(t, 2, fsm.UpsertNamespaceRequest{}),
		commandEntry(t, 3, fsm.CheckStateRequest{}),
		commandEntry(t, 4, fsm.LogCheckpointRequest{}),
	}
	if err := leader.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	c, ok := decodeCheckpoint(4, batch[3].Extensions)
	if !ok || c.From != 1 || c.To != 3 || c.Sum == 0 {
		t.Fatalf("the leader's checkpoint says %+v (ok %v), want entries 1 to 3", c, ok)
	}
	if err := follower.StoreLogs(copyLogs(batch)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "both checks", func() bool { return results(leader, "ok") == 1 && results(follower, "ok") == 1 })

	// The follower's disk now hands back another entry 6 than it stored.
	next := []*raft.Log{commandEntry(t, 5, fsm.UpsertNamespaceRequest{}), commandEntry(t, 6, fsm.CheckStateRequest{}),
		commandEntry(t, 7, fsm.LogCheckpointRequest{})}
	if err := leader.StoreLogs(next); err != nil {
		t.Fatal(err)
	}
	if c, _ := decodeCheckpoint(7, next[2].Extensions); c.From != 5 || c.To != 6 {
		t.Fatalf("the second checkpoint covers %d to %d, want 5 to 6", c.From, c.To)
	}
	sent := copyLogs(next)
	if err := followerDisk.StoreLogs(sent[:2]); err != nil {
		t.Fatal(err)
	}
	altered := *sent[1]
	altered.Data = append([]byte(nil), sent[1].Data...)
	altered.Data[len(altered.Data)-1] ^= 0x01
	if err := followerDisk.StoreLog(&altered); err != nil { // the bit flip on disk
		t.Fatal(err)
	}
	if err := follower.StoreLogs(sent[2:]); err != nil { // the checkpoint arrives
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the follower's mismatch", func() bool { return results(follower, "mismatch") == 1 })
	wait.For(t, 5*time.Second, "the leader's own check", func() bool { return results(leader, "ok") == 2 })
	if errs := followerErrs.list(); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "log_mismatch: entries 5 to 6") {
		t.Fatalf("the follower reported %v", errs)
	}
	if errs := leaderErrs.list(); len(errs) != 0 || testutil.ToFloat64(leader.met.corrupt) != 0 || testutil.ToFloat64(follower.met.corrupt) != 1 {
		t.Fatalf("leader reported %v (corrupt %v), follower corrupt %v", errs,
			testutil.ToFloat64(leader.met.corrupt), testutil.ToFloat64(follower.met.corrupt))
	}
}

// A range the log no longer holds (compacted, or a snapshot was installed instead) is
// skipped, not a mismatch; a truncated tail starts a new range where writing resumes.
func TestLogVerifier_CompactedRangeSkippedTruncationRestarts(t *testing.T) {
	leader, disk, errs := verifierOn(t)
	if err := leader.StoreLogs([]*raft.Log{commandEntry(t, 1, fsm.UpsertNamespaceRequest{}), commandEntry(t, 2, fsm.UpsertNamespaceRequest{})}); err != nil {
		t.Fatal(err)
	}
	if err := disk.DeleteRange(1, 1); err != nil { // compaction under the verifier
		t.Fatal(err)
	}
	cp := commandEntry(t, 3, fsm.LogCheckpointRequest{})
	if err := leader.StoreLogs([]*raft.Log{cp}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the skip", func() bool { return results(leader, "skipped") == 1 })

	// A conflict truncates entries 4 and 5; the range restarts at the new entry 4.
	if err := leader.StoreLogs([]*raft.Log{commandEntry(t, 4, fsm.UpsertNamespaceRequest{}), commandEntry(t, 5, fsm.UpsertNamespaceRequest{})}); err != nil {
		t.Fatal(err)
	}
	if err := leader.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	replaced := commandEntry(t, 4, fsm.CheckStateRequest{})
	replaced.Term = 2
	cp = commandEntry(t, 5, fsm.LogCheckpointRequest{})
	cp.Term = 2
	if err := leader.StoreLogs([]*raft.Log{replaced, cp}); err != nil {
		t.Fatal(err)
	}
	if c, _ := decodeCheckpoint(5, cp.Extensions); c.From != 4 || c.To != 4 {
		t.Fatalf("after the truncation the checkpoint covers %d to %d, want 4 to 4", c.From, c.To)
	}
	wait.For(t, 5*time.Second, "the check after the truncation", func() bool { return results(leader, "ok") == 1 })
	if got := errs.list(); len(got) != 0 {
		t.Fatalf("mismatches reported: %v", got)
	}
}

// In a cluster the leader writes checkpoints on its own, and every node checks them. A
// follower whose log is altered on disk reports it: not ready with reason log_mismatch,
// roster_raft_log_corrupt 1; the other nodes keep agreeing.
func TestCluster_LogCheckpointFindsAFollowersAlteredLog(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.mod = func(cfg *Config) { cfg.LogVerifyInterval = 100 * time.Millisecond }
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	leader := c.waitForLeader(10 * time.Second)
	for _, tn := range c.nodes {
		wait.For(t, 20*time.Second, tn.id+"'s first agreeing checkpoint", func() bool { return results(tn.N().logCheck, "ok") >= 1 })
	}

	follower := c.followers(leader)[0]
	const marker = "orders-6b1d0c"
	idx := mustApplyNamespace(t, leader.N(), marker)
	wait.For(t, 10*time.Second, "the follower to store the entry", func() bool {
		var l raft.Log
		return follower.N().append.GetLog(idx, &l) == nil
	})
	if n := flipInFiles(t, filepath.Join(follower.dir, raftDirName), []byte(marker)); n == 0 {
		t.Fatal("the entry is in none of the follower's log files")
	}

	wait.For(t, 20*time.Second, "the follower's mismatch", func() bool {
		ready, rd := follower.N().Ready()
		return !ready && strings.HasPrefix(rd.Reason, "log_mismatch:")
	})
	if got := testutil.ToFloat64(follower.N().met.logVerify.corrupt); got != 1 {
		t.Fatalf("roster_raft_log_corrupt = %v on the follower", got)
	}
	if !strings.Contains(c.logs.String(), "this node's Raft log differs from what was written") {
		t.Fatal("no error logged")
	}
	for _, tn := range c.nodes {
		if tn == follower {
			continue
		}
		if got := results(tn.N().logCheck, "mismatch"); got != 0 {
			t.Fatalf("%s counted %v mismatches", tn.id, got)
		}
		if ready, rd := tn.N().Ready(); !ready && strings.HasPrefix(rd.Reason, "log_mismatch") {
			t.Fatalf("%s: %s", tn.id, rd.Reason)
		}
	}
}

// flipInFiles flips one bit of the last byte of every occurrence of marker in the
// files under dir, in place: a disk that hands back other bytes than it was given. It
// returns how many it changed.
func flipInFiles(t *testing.T, dir string, marker []byte) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		for off := 0; ; {
			i := bytes.Index(b[off:], marker)
			if i < 0 {
				return nil
			}
			at := off + i + len(marker) - 1
			if _, err := f.WriteAt([]byte{b[at] ^ 0x01}, int64(at)); err != nil {
				return err
			}
			n++
			off = at + 1
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// While a server of an older release is in the configuration no checkpoint is written
// (that server could not apply one); once it runs this release, checkpoints begin.
func TestCluster_NoLogCheckpointBesideAnOlderServer(t *testing.T) {
	c := newTestCluster(t, 3, true)
	c.mod = func(cfg *Config) { cfg.LogVerifyInterval = 50 * time.Millisecond }
	old := c.nodes[2]
	old.newest = fsm.BatchType
	for _, tn := range c.nodes {
		c.start(tn, "")
	}
	c.waitForLeader(10 * time.Second)
	wait.For(t, 20*time.Second, "the leader to hold its checkpoints back", func() bool {
		return strings.Contains(c.logs.String(), "log checkpoints wait until every server applies them")
	})
	for _, tn := range c.nodes {
		if got := results(tn.N().logCheck, "ok") + results(tn.N().logCheck, "mismatch"); got != 0 {
			t.Fatalf("%s checked %v checkpoints beside a server that cannot apply one", tn.id, got)
		}
	}
	if h := old.sm.Halted(); h != nil {
		t.Fatalf("the older server halted: %v", h)
	}

	c.stop(old)
	old.newest = 0
	c.start(old, "")
	for _, tn := range c.nodes {
		wait.For(t, 30*time.Second, tn.id+"'s first checkpoint after the upgrade", func() bool {
			return results(tn.N().logCheck, "ok") >= 1
		})
	}
}
