package main

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
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
			head := []string{"ID", "RAFT_ADDR", "HTTP_ADDR", "VOTER", "LEADER", "LAST_CONTACT"}
			if status {
				head = append(head, "READY", "APPLIED", "LAG")
			}
			t := newTable(a.stdout, head...)
			for _, m := range res.Members {
				contact := "-"
				if m.LastContactMillis >= 0 {
					contact = (time.Duration(m.LastContactMillis) * time.Millisecond).String()
				}
				row := []string{m.ID, orDash(m.RaftAddr), orDash(m.HTTPAddr), strconv.FormatBool(m.Voter), strconv.FormatBool(m.Leader), contact}
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
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func (a *app) versionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			bi := buildInfo{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if a.output == outputJSON {
				return writeJSON(a.stdout, bi)
			}
			_, err := fmt.Fprintf(a.stdout, "roster %s (%s %s/%s)\n", bi.Version, bi.Go, bi.OS, bi.Arch)
			return err
		},
	}
	cmd.Flags().StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	return cmd
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
