package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rosterhq/roster/raftnode"
)

// autopilotOptions are the autopilot flags of `roster server` (docs/operations.md,
// "Autopilot"); zero values take raftnode's defaults.
type autopilotOptions struct {
	CleanupDeadServers   bool
	DeadServerThreshold  time.Duration
	MinQuorum            int
	LastContactThreshold time.Duration
	MaxTrailingLogs      uint64
}

// autopilotFlags adds the autopilot flags of `roster server`.
func autopilotFlags(fs *pflag.FlagSet, o *autopilotOptions) {
	fs.BoolVar(&o.CleanupDeadServers, "cleanup-dead-servers", false,
		"let the leader remove a server out of contact for longer than --dead-server-threshold, one per round, never below --autopilot-min-quorum voters")
	fs.DurationVar(&o.DeadServerThreshold, "dead-server-threshold", 0,
		fmt.Sprintf("how long a server must be out of contact with the leader to be dead (0: %s)", raftnode.DefaultDeadServerThreshold))
	fs.IntVar(&o.MinQuorum, "autopilot-min-quorum", 0,
		fmt.Sprintf("fewest voters a dead-server removal may leave (0: %d)", raftnode.DefaultMinQuorum))
	fs.DurationVar(&o.LastContactThreshold, "autopilot-last-contact-threshold", 0,
		"longest time without a successful exchange with the leader for a server to count as healthy (0: the Raft heartbeat timeout)")
	fs.Uint64Var(&o.MaxTrailingLogs, "autopilot-max-trailing-logs", 0,
		fmt.Sprintf("most entries a server may lack of the leader's log and count as healthy (0: %d)", raftnode.DefaultMaxTrailingLogs))
}

// validate refuses the values no node would start with, naming the flag.
func (o autopilotOptions) validate() error {
	switch {
	case o.DeadServerThreshold < 0:
		return fmt.Errorf("--dead-server-threshold %s: must not be negative", o.DeadServerThreshold)
	case o.MinQuorum < 0:
		return fmt.Errorf("--autopilot-min-quorum %d: must not be negative", o.MinQuorum)
	case o.LastContactThreshold < 0:
		return fmt.Errorf("--autopilot-last-contact-threshold %s: must not be negative", o.LastContactThreshold)
	}
	return nil
}

// config is the node's autopilot configuration (the trailing-logs limit is Raft tuning).
func (o autopilotOptions) config() raftnode.AutopilotConfig {
	return raftnode.AutopilotConfig{
		LastContactThreshold: o.LastContactThreshold,
		CleanupDeadServers:   o.CleanupDeadServers,
		DeadServerThreshold:  o.DeadServerThreshold,
		MinQuorum:            o.MinQuorum,
	}
}

// autopilotCmd groups the autopilot commands.
func (a *app) autopilotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "autopilot",
		Short: "Show the leader's view of the servers' health (autopilot)",
		Long: "Autopilot is the leader's view of every server's health, which it uses to promote joined\n" +
			"servers and, with roster server --cleanup-dead-servers, to remove dead ones. See\n" +
			"docs/operations.md, \"Autopilot: server health and dead-server cleanup\".",
	}
	cmd.AddCommand(a.autopilotHealthCmd())
	return cmd
}

func (a *app) autopilotHealthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Show every server's health, the failure tolerance and the autopilot settings",
		Long: "Ask the leader (through the node at --addr) for every server's health: whether it is in\n" +
			"contact, on the leader's term and caught up, since when, and why not; and how many voters\n" +
			"may fail before the cluster loses its quorum. Needs operator: read on a cluster with ACLs.",
		Example: "  roster autopilot health\n  roster autopilot health -o json",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.client().AutopilotHealth(ctxOf(cmd))
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, h)
			}
			cleanup := "off"
			if h.Config.CleanupDeadServers {
				cleanup = fmt.Sprintf("on (dead after %s, minimum quorum %d)", h.Config.DeadServerThreshold, h.Config.MinQuorum)
			}
			fmt.Fprintf(a.stdout, "Healthy: %t  Failure tolerance: %d  Leader: %s  Voters: %s\n", h.Healthy, h.FailureTolerance,
				safeText(orDash(h.Leader)), safeText(orDash(strings.Join(h.Voters, ","))))
			fmt.Fprintf(a.stdout, "Healthy means contact within %s, on the leader's term, at most %d entries behind; dead-server cleanup %s\n\n",
				safeText(h.Config.LastContactThreshold), h.Config.MaxTrailingLogs, safeText(cleanup))
			t := newTable(a.stdout, "ID", "ADDRESS", "STATUS", "HEALTHY", "LAST_CONTACT", "LAST_TERM", "LAST_INDEX", "TRAILING", "STABLE_SINCE", "VERSION", "REASON")
			for _, s := range h.Servers {
				since := "-"
				if !s.StableSince.IsZero() {
					since = s.StableSince.Local().Format(time.RFC3339)
				}
				t.row(s.ID, orDash(s.Address), s.Status, strconv.FormatBool(s.Healthy), s.LastContact,
					strconv.FormatUint(s.LastTerm, 10), strconv.FormatUint(s.LastIndex, 10), strconv.FormatUint(s.TrailingLogs, 10),
					since, orDash(safeText(s.Release)), orDash(s.Reason))
			}
			return t.flush()
		},
	}
	a.clientFlags(cmd)
	return cmd
}
