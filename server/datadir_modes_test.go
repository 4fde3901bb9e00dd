package server_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rosterhq/roster/server/servertest"
)

// modeProblems lists every directory under root that is not 0700 and every regular
// file that is not 0600, and counts the files.
func modeProblems(t *testing.T, root string) (problems []string, files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case d.IsDir() && info.Mode().Perm() != 0o700:
			problems = append(problems, rel+"/ "+info.Mode().Perm().String())
		case d.Type().IsRegular():
			files++
			if info.Mode().Perm() != 0o600 {
				problems = append(problems, rel+" "+info.Mode().Perm().String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems, files
}

// Every file under a data directory is 0600 and every directory 0700 — the state file,
// the Raft log, Raft's snapshots (state.bin holds health-check passwords and token
// hashes), the snapshot spool, the markers — after Raft snapshots, a backup restore and
// a restart; and a data directory whose files an older release left readable by others
// is made private at the next start.
func TestDataDir_EverythingIsPrivate(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c := servertest.New(t, 1, servertest.FastTimeouts())
	nd := c.Nodes[c.MustLeader()]
	cl := nd.Client()
	register(ctx, t, cl, "svc", "127.0.0.1", 7)
	noErr(t, nd.Server.Node().Raft().Snapshot().Error())
	var archive bytes.Buffer
	if _, err := cl.SaveSnapshot(ctx, &archive, false); err != nil {
		t.Fatal(err)
	}
	noErr(t, cl.RestoreSnapshot(ctx, bytes.NewReader(archive.Bytes())))
	register(ctx, t, cl, "svc", "127.0.0.1", 8)
	noErr(t, nd.Server.Node().Raft().Snapshot().Error())

	problems, files := modeProblems(t, nd.DataDir)
	if len(problems) > 0 {
		t.Fatalf("after Raft snapshots and a restore, not private:\n%s", strings.Join(problems, "\n"))
	}
	var snaps []string
	_ = filepath.WalkDir(filepath.Join(nd.DataDir, "raft", "snapshots"), func(p string, d fs.DirEntry, _ error) error {
		if d != nil && d.Name() == "state.bin" {
			snaps = append(snaps, p)
		}
		return nil
	})
	if len(snaps) < 2 || files < 5 {
		t.Fatalf("%d files, snapshots %v: the test did not see what it checks", files, snaps)
	}

	// An older release's modes: everything readable by all.
	c.Stop(0)
	err := filepath.WalkDir(nd.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	})
	noErr(t, err)
	if p, _ := modeProblems(t, nd.DataDir); len(p) == 0 {
		t.Fatal("the modes were not widened")
	}
	c.Start(0)
	c.MustLeader()
	if problems, _ := modeProblems(t, nd.DataDir); len(problems) > 0 {
		t.Fatalf("after a restart, not private:\n%s", strings.Join(problems, "\n"))
	}
	c.Stop(0)
	if problems, _ := modeProblems(t, nd.DataDir); len(problems) > 0 {
		t.Fatalf("after a clean stop, not private:\n%s", strings.Join(problems, "\n"))
	}
}
