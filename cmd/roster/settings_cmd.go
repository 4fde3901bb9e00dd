package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// settingsCmd shows the cluster-wide settings, or changes the ones given as flags.
func (a *app) settingsCmd() *cobra.Command {
	var (
		metadataMax int
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "settings",
		Short: "Show or change the cluster-wide settings",
		Long: "Show the cluster-wide settings (the same on every node, kept in the replicated state),\n" +
			"or change the ones given as flags; each change is one Raft entry.",
		Example: "  roster settings\n  roster settings --metadata-max-bytes 4096",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := ctxOf(cmd)
			c := a.client()
			if cmd.Flags().Changed("metadata-max-bytes") {
				idx, err := c.UpdateSettings(ctx, api.SettingsRequest{MetadataMaxBytes: &metadataMax})
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "settings changed at index %d\n", idx)
			}
			res, _, err := c.Settings(ctx, client.QueryOptions{Consistency: consistency})
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			t := newTable(a.stdout, "SETTING", "VALUE")
			t.row("metadataMaxBytes", strconv.Itoa(res.MetadataMaxBytes))
			t.row("modifyIndex", strconv.FormatUint(res.ModifyIndex, 10))
			return t.flush()
		},
	}
	cmd.Flags().IntVar(&metadataMax, "metadata-max-bytes", 0, "set the largest metadata map, in bytes of JSON")
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale")
	a.clientFlags(cmd)
	return cmd
}
