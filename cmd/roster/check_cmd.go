package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/server"
)

// checkCmd verifies a stopped node's data directory.
func (a *app) checkCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify a stopped node's data directory",
		Long: "check reads the files of a STOPPED node and changes nothing: the state file (bbolt's page\n" +
			"consistency, the schema, every record), the hash a clean shutdown recorded (a state file\n" +
			"changed since shows as state_mismatch), the directory's cluster id against the state's,\n" +
			"and the Raft log (contiguous indexes) and newest snapshot (its checksum). It exits 0 when\n" +
			"nothing is wrong and 1 when it found a problem; it refuses to run on a running node.",
		Example: "  roster check --data-dir /var/lib/roster",
		Args:    exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if dataDir == "" {
				return usagef("--data-dir is required (or %s)", envName("data-dir"))
			}
			c, err := server.CheckDataDir(dataDir)
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				if err := writeJSON(a.stdout, c); err != nil {
					return err
				}
			} else {
				a.printCheck(c)
			}
			if !c.OK() {
				return fmt.Errorf("%s: %d problem(s) found", dataDir, len(c.Problems))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of the stopped node (required)")
	cmd.Flags().StringVarP(&a.output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

func (a *app) printCheck(c server.DataDirCheck) {
	w := a.stdout
	fmt.Fprintf(w, "state file:   applied index %d; %d namespaces, %d services, %d clusters, %d instances, %d members\n",
		c.StateApplied, c.StateCounts.Namespaces, c.StateCounts.Services, c.StateCounts.Clusters, c.StateCounts.Instances, c.StateCounts.Members)
	fmt.Fprintf(w, "state hash:   %s (compared with the clean-shutdown record: %v)\n", orDash(c.StateHash), c.ShutdownChecked)
	fmt.Fprintf(w, "cluster id:   %s\n", orDash(c.ClusterID))
	fmt.Fprintf(w, "raft log:     %d entries, %d..%d; %d snapshot(s)", c.Raft.Entries, c.Raft.FirstIndex, c.Raft.LastIndex, len(c.Raft.Snapshots))
	if len(c.Raft.Snapshots) > 0 {
		fmt.Fprintf(w, ", newest at index %d (checksum verified)", c.Raft.Snapshots[0].Index)
	}
	fmt.Fprintln(w)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note:         %s\n", n)
	}
	if c.OK() {
		fmt.Fprintln(w, "result:       ok")
		return
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "PROBLEM:      %s\n", safeText(p))
	}
}
