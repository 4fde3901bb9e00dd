package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/datadir"
	"github.com/rosterhq/roster/fsm"
	"github.com/rosterhq/roster/snapshot"
)

func (a *app) leaderCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Show the current leader; `leader transfer` hands leadership to another server",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().Leader(ctxOf(cmd))
			if err != nil {
				return err
			}
			return a.printLeader(l)
		},
	}
	a.clientFlags(cmd)
	cmd.AddCommand(a.leaderTransferCmd())
	return cmd
}

// printLeader prints the leader as a table or, with -o json, as api.Leader.
func (a *app) printLeader(l api.Leader) error {
	if a.output == outputJSON {
		return writeJSON(a.stdout, l)
	}
	t := newTable(a.stdout, "ID", "RAFT_ADDR", "HTTP_ADDR")
	t.row(l.ID, orDash(l.RaftAddr), orDash(l.HTTPAddr))
	return t.flush()
}

func (a *app) membersCmd() *cobra.Command {
	var (
		consistency string
		status      bool
	)
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the cluster's Raft servers; `members remove` removes one",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := client.QueryOptions{Consistency: consistency}
			var (
				res api.MembersResponse
				err error
			)
			if status {
				res, _, err = a.client().MembersWithStatus(ctxOf(cmd), q)
			} else {
				res, _, err = a.client().Members(ctxOf(cmd), q)
			}
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			head := []string{"ID", "RAFT_ADDR", "HTTP_ADDR", "VOTER", "LEADER", "LAST_CONTACT", "VERSION", "NEWEST_COMMAND"}
			if status {
				head = append(head, "READY", "APPLIED", "LAG")
			}
			t := newTable(a.stdout, head...)
			for _, m := range res.Members {
				contact := "-"
				if m.LastContactMillis >= 0 {
					contact = (time.Duration(m.LastContactMillis) * time.Millisecond).String()
				}
				version, newest := memberBuild(m)
				row := []string{m.ID, orDash(m.RaftAddr), orDash(m.HTTPAddr), strconv.FormatBool(m.Voter), strconv.FormatBool(m.Leader), contact,
					version, newest}
				if status {
					row = append(row, memberStatusCells(m.Status)...)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale (works without a leader)")
	cmd.Flags().BoolVar(&status, "status", false, "also ask every member for its readiness, applied index and lag")
	a.clientFlags(cmd)
	cmd.AddCommand(a.membersRemoveCmd())
	return cmd
}

func (a *app) readyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ready",
		Short: "Exit 0 when the node at --addr is ready to serve, 1 otherwise",
		Long: "Ask the node at --addr whether it is ready (it knows a leader and has applied what is\n" +
			"committed). Exits 0 when ready and 1 otherwise; suitable as a container health check.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.client().Ready(ctxOf(cmd))
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				if err := writeJSON(a.stdout, r); err != nil {
					return err
				}
			} else if r.Ready {
				fmt.Fprintf(a.stdout, "ready (leader %s, applied index %d)\n", safeText(orDash(r.Leader)), r.AppliedIndex)
			}
			if r.Ready {
				return nil
			}
			reason := r.Reason
			if reason == "" {
				reason = fmt.Sprintf("applied index %d, commit index %d", r.AppliedIndex, r.CommitIndex)
			}
			return errors.New("not ready: " + reason)
		},
	}
	a.clientFlags(cmd)
	return cmd
}

// buildInfo is what `roster version -o json` prints.
type buildInfo struct {
	buildinfo.Info
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// NewestCommand is the newest state-machine command type this build applies; the
	// leader writes a type only once every server announces at least it.
	NewestCommand     uint8  `json:"newestCommand"`
	NewestCommandName string `json:"newestCommandName"`
	// DataFormat and SnapshotFormat are the newest data directory and snapshot archive
	// formats this build reads (and the ones it writes).
	DataFormat     int `json:"dataFormat"`
	SnapshotFormat int `json:"snapshotFormat"`
}

func currentBuild() buildInfo {
	return buildInfo{Info: buildinfo.Get(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		NewestCommand: uint8(fsm.NewestType), NewestCommandName: fsm.NewestType.String(),
		DataFormat: datadir.Format, SnapshotFormat: snapshot.FormatVersion}
}

// writeVersion prints the build as `roster version` and `roster --version` do.
func writeVersion(w io.Writer, bi buildInfo) error {
	_, err := fmt.Fprintf(w, "roster %s\n  commit:          %s\n  go:              %s %s/%s\n"+
		"  newest command:  %d (%s)\n  data format:     %d\n  snapshot format: %d\n",
		bi.Version, bi.ShortCommit(), bi.GoVersion, bi.OS, bi.Arch,
		bi.NewestCommand, bi.NewestCommandName, bi.DataFormat, bi.SnapshotFormat)
	return err
}

func (a *app) versionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version and the formats this build reads",
		Long: "Print this binary's release version, the git commit it was built from, the Go version\n" +
			"that built it, the newest state-machine command type it applies (a leader writes a\n" +
			"type only once every server applies it) and the newest data directory and snapshot\n" +
			"formats it reads. `roster --version` prints the same.",
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			bi := currentBuild()
			if a.output == outputJSON {
				return writeJSON(a.stdout, bi)
			}
			return writeVersion(a.stdout, bi)
		},
	}
	cmd.Flags().StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

// memberBuild is the VERSION and NEWEST_COMMAND cells of a member: what it said of itself
// (--status), else what the answering node knows of it.
func memberBuild(m api.Member) (string, string) {
	if st := m.Status; st != nil && st.Build != nil {
		return safeText(st.Build.Version), strconv.Itoa(int(st.Build.NewestCommand))
	}
	release := m.Release
	if release == "" {
		release = "-"
	}
	newest := "-"
	if m.NewestCommand != 0 {
		newest = strconv.Itoa(int(m.NewestCommand))
	}
	return safeText(release), newest
}

// memberStatusCells are the READY, APPLIED and LAG cells of a member's status.
func memberStatusCells(st *api.MemberStatus) []string {
	switch {
	case st == nil:
		return []string{"-", "-", "-"}
	case !st.Reachable:
		return []string{"unreachable: " + safeText(st.Error), "-", "-"}
	}
	ready := strconv.FormatBool(st.Ready)
	if !st.Ready && st.Reason != "" {
		ready += " (" + safeText(st.Reason) + ")"
	}
	return []string{ready, strconv.FormatUint(st.AppliedIndex, 10), strconv.FormatUint(st.Lag, 10)}
}
