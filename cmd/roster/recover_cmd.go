package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/raftnode"
)

func (a *app) recoverCmd() *cobra.Command {
	var (
		dataDir  string
		peers    string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Rewrite the Raft configuration of a stopped node after a permanent loss of quorum",
		Long: "Disaster recovery for a cluster that lost a quorum of its servers for good. Run it on each\n" +
			"surviving node while the node is STOPPED, with the same --peers list (the survivors), then\n" +
			"start them: they form a cluster of exactly those servers with their data. On one node\n" +
			"alone, --peers names just that node. Every entry in the node's Raft log is treated as\n" +
			"committed. Refuses to run while the node is running. See docs/operations.md.",
		Example: "  roster recover --data-dir /var/lib/roster --peers n1=10.0.0.1:7848",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if dataDir == "" {
				return usagef("--data-dir is required (or %s)", envName("data-dir"))
			}
			if strings.TrimSpace(peers) == "" {
				return usagef("--peers is required (or %s): id=raftaddr of every server of the recovered cluster", envName("peers"))
			}
			list, err := raftnode.ParsePeers(peers)
			if err != nil {
				return usagef("--peers: %w", err)
			}
			log, err := newLogger(a.stderr, logLevel)
			if err != nil {
				return asUsage(err)
			}
			if err := raftnode.Recover(dataDir, list, log); err != nil {
				return err // ErrNodeRunning: "node appears to be running: ... is locked ..."
			}
			names := make([]string, len(list))
			for i, p := range list {
				names[i] = p.String()
			}
			_, err = fmt.Fprintf(a.stdout, "recovered %s: its Raft configuration is now %s\nstart the node(s) of that list now\n",
				dataDir, strings.Join(names, ","))
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", "", "data directory of the stopped node (required)")
	fs.StringVar(&peers, "peers", "", "the recovered cluster's servers, id=raftaddr,... (required)")
	fs.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	return cmd
}
