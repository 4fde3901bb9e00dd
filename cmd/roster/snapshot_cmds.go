package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/snapshot"
)

func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, inspect and restore backup archives of the cluster state",
		Long: "A snapshot archive is gzip(tar{meta.json, state.db, SHA256SUMS}): the whole registry state\n" +
			"at one Raft index, with checksums. See docs/operations.md for backup and restore procedures.",
	}
	cmd.AddCommand(a.snapshotSaveCmd(), a.snapshotInspectCmd(), a.snapshotRestoreCmd())
	return cmd
}

// snapshotFlags adds the flags of the snapshot commands that talk to a node. Unlike
// the other client commands, --timeout defaults to no limit: an archive can be large.
func (a *app) snapshotFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&a.addr, "addr", defaultAddr, "API address of any Roster node (host:port or URL)")
	fs.StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	fs.DurationVar(&a.timeout, "timeout", 0, "give up after this long (0: no limit)")
	a.tlsFlags(cmd)
}

// withTimeout bounds ctx by --timeout when it is set.
func (a *app) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.timeout > 0 {
		return context.WithTimeout(ctx, a.timeout)
	}
	return context.WithCancel(ctx)
}

// archiveReport is what the snapshot commands print with -o json.
type archiveReport struct {
	File          string          `json:"file"`
	ArchiveBytes  int64           `json:"archiveBytes"`
	Verified      bool            `json:"verified"`
	FormatVersion int             `json:"formatVersion"`
	Index         uint64          `json:"index"`
	Term          uint64          `json:"term"`
	RosterVersion string          `json:"rosterVersion"`
	CreatedAt     time.Time       `json:"createdAt"`
	StateBytes    int64           `json:"stateBytes"`
	Counts        snapshot.Counts `json:"counts"`
}

func newArchiveReport(file string, size int64, m snapshot.Meta) archiveReport {
	return archiveReport{
		File: file, ArchiveBytes: size, Verified: true,
		FormatVersion: m.FormatVersion, Index: m.Index, Term: m.Term, RosterVersion: m.RosterVersion,
		CreatedAt: m.CreatedAt, StateBytes: m.Size, Counts: m.Counts,
	}
}

// print writes the report as a two-column table or as JSON.
func (a *app) printArchive(r archiveReport) error {
	if a.output == outputJSON {
		return writeJSON(a.stdout, r)
	}
	t := newTable(a.stdout, "FIELD", "VALUE")
	t.row("File", r.File)
	t.row("Archive size", fmt.Sprintf("%d bytes", r.ArchiveBytes))
	t.row("Format version", strconv.Itoa(r.FormatVersion))
	t.row("Index", strconv.FormatUint(r.Index, 10))
	t.row("Term", strconv.FormatUint(r.Term, 10))
	t.row("Roster version", orDash(r.RosterVersion))
	t.row("Created", r.CreatedAt.UTC().Format(time.RFC3339))
	t.row("State size", fmt.Sprintf("%d bytes", r.StateBytes))
	t.row("Namespaces", strconv.Itoa(r.Counts.Namespaces))
	t.row("Services", strconv.Itoa(r.Counts.Services))
	t.row("Instances", strconv.Itoa(r.Counts.Instances))
	t.row("Checks", "passed (gzip, tar, meta.json, SHA-256 of meta.json and state.db, state file)")
	return t.flush()
}

// verifyArchive runs every check of snapshot.Inspect on the archive at path, the state
// file check included (state.db is extracted into tempDir and removed again). The
// file's size bounds the extraction: a state.db that would expand beyond the reader's
// limit is refused before anything is written.
func verifyArchive(path, tempDir string) (snapshot.Meta, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return snapshot.Meta{}, 0, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return snapshot.Meta{}, 0, err
	}
	meta, err := snapshot.Inspect(f, snapshot.ReadOptions{Dir: tempDir, ArchiveSize: info.Size(), Check: snapshot.CheckState})
	if err != nil {
		return snapshot.Meta{}, 0, err
	}
	return meta, info.Size(), nil
}

func (a *app) snapshotSaveCmd() *cobra.Command {
	var stale bool
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Download a backup archive of the whole cluster state into FILE",
		Long: "Download a backup archive from the leader (or, with --stale, from the node at --addr,\n" +
			"which works without a leader). The archive goes to FILE.tmp, is verified whole (checksums\n" +
			"and the state file), and only then renamed to FILE; a failed save leaves FILE untouched.",
		Example: "  roster snapshot save /backups/roster-$(date +%Y%m%d-%H%M).snap --addr 10.0.0.1:8848",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.withTimeout(ctxOf(cmd))
			defer cancel()
			return a.saveSnapshot(ctx, args[0], stale)
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "let the node at --addr serve its own state instead of the leader's")
	a.snapshotFlags(cmd)
	return cmd
}

// saveSnapshot downloads into file.tmp, syncs, verifies and renames it to file.
func (a *app) saveSnapshot(ctx context.Context, file string, stale bool) (err error) {
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	var w io.Writer = f
	p := a.progress(0, "downloading "+filepath.Base(file))
	if p != nil {
		w = p.Writer(f)
	}
	_, err = a.client().SaveSnapshot(ctx, w, stale)
	if p != nil {
		p.Finish()
	}
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		f = nil
		return err
	}
	f = nil
	meta, size, err := verifyArchive(tmp, filepath.Dir(tmp))
	if err != nil {
		return fmt.Errorf("the downloaded archive failed verification (%s removed): %w", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	syncDir(filepath.Dir(file))
	return a.printArchive(newArchiveReport(file, size, meta))
}

// syncDir makes a rename in dir durable; failures are ignored (not every file system
// can sync a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

func (a *app) snapshotInspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a backup archive and print what it holds (offline)",
		Long: "Check the whole archive — gzip and tar structure, meta.json, the SHA-256 sums of meta.json\n" +
			"and state.db, and that state.db is a readable state file holding the counts meta.json\n" +
			"records, and that every number in meta.json is within the format's limits — and print its\n" +
			"metadata. Works on the file alone; no node is contacted.\n" +
			"state.db is extracted into $TMPDIR for the check and removed again. Exits 1 with the\n" +
			"reason when the archive is bad.",
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			meta, size, err := verifyArchive(args[0], "")
			if err != nil {
				return err
			}
			return a.printArchive(newArchiveReport(args[0], size, meta))
		},
	}
	cmd.Flags().StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

func (a *app) snapshotRestoreCmd() *cobra.Command {
	var aclFrom string
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the whole cluster state with a backup archive",
		Long: "Upload FILE to the cluster (any node forwards it to the leader), which checks the whole\n" +
			"archive and then replaces the state of every member with it. Everything written since the\n" +
			"archive was saved is lost. The archive is verified locally first (checksums), so a\n" +
			"damaged file is refused before the upload. The cluster keeps its own ACL tokens unless\n" +
			"--acl archive (needs acl: write) restores the archive's. See docs/operations.md before using it.",
		Example: "  roster snapshot restore /backups/roster-20261129-0300.snap --addr 10.0.0.1:8848",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch aclFrom {
			case api.RestoreACLCluster, api.RestoreACLArchive:
			default:
				return usagef("--acl must be %q or %q, got %q", api.RestoreACLCluster, api.RestoreACLArchive, aclFrom)
			}
			ctx, cancel := a.withTimeout(ctxOf(cmd))
			defer cancel()
			return a.restoreSnapshot(ctx, args[0], aclFrom)
		},
	}
	cmd.Flags().StringVar(&aclFrom, "acl", api.RestoreACLCluster,
		"whose ACL tokens the restored cluster has: cluster (keep the current ones) or archive (the archive's; needs acl: write)")
	a.snapshotFlags(cmd)
	return cmd
}

// restoreSnapshot checks file's container and checksums locally, then uploads it.
func (a *app) restoreSnapshot(ctx context.Context, file, aclFrom string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	meta, err := snapshot.Inspect(f, snapshot.ReadOptions{ArchiveSize: info.Size()})
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var r io.Reader = f
	p := a.progress(info.Size(), "uploading "+filepath.Base(file))
	if p != nil {
		r = p.Reader(f)
	}
	res, err := a.client().RestoreSnapshotWith(ctx, r, client.RestoreOptions{ACL: aclFrom})
	if p != nil {
		p.Finish()
	}
	if err != nil {
		if client.IsConflict(err) {
			return fmt.Errorf("%w (wait for the running restore to finish)", err)
		}
		return err
	}
	rep := newArchiveReport(file, info.Size(), meta)
	if a.output == outputJSON {
		return writeJSON(a.stdout, struct {
			Restored bool   `json:"restored"`
			ACL      string `json:"acl"`
			archiveReport
		}{true, res.ACL, rep})
	}
	_, err = fmt.Fprintf(a.stdout, "restored %s: index %d, %d namespaces, %d services, %d instances; ACL tokens: the %s's\n",
		file, meta.Index, meta.Counts.Namespaces, meta.Counts.Services, meta.Counts.Instances, res.ACL)
	return err
}
