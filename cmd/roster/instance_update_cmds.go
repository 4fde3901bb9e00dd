package main

import (
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
	"github.com/rosterhq/roster/model"
)

// casAttempts bounds the read-modify-write rounds of a command that writes back what it
// read (?cas=N) when the object keeps changing underneath it.
const casAttempts = 5

func (a *app) updateCmd() *cobra.Command {
	var (
		sc         scope
		weight     float64
		enabled    bool
		cluster    string
		meta       []string
		removeMeta []string
	)
	cmd := &cobra.Command{
		Use:   "update SERVICE IP:PORT",
		Short: "Change an instance's weight, enabled flag, cluster or metadata",
		Long: "Change only the fields given of an existing instance (PATCH .../instances/{ip}:{port}).\n" +
			"--meta key=value adds or replaces a metadata key and --remove-meta key removes one; the\n" +
			"other keys are kept: the command reads the instance and writes the merged map only if\n" +
			"the instance has not changed since (retrying a few times if it has). Health is not set\n" +
			"here (see roster set-health).",
		Example: "  roster update orders 127.0.0.7:8080 --weight 0.5\n" +
			"  roster update orders 127.0.0.7:8080 --enabled=false --meta drain=yes\n" +
			"  roster update orders 127.0.0.7:8080 --remove-meta drain --cluster west",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, port, err := parseInstanceAddr(args[1])
			if err != nil {
				return err
			}
			fs := cmd.Flags()
			var req api.InstanceRequest
			if fs.Changed("weight") {
				if weight != weight || weight < 0 || weight > model.MaxWeight {
					return usagef("--weight %v: must be between 0 and %d", weight, model.MaxWeight)
				}
				req.Weight = &weight
			}
			if fs.Changed("enabled") {
				req.Enabled = &enabled
			}
			if fs.Changed("cluster") {
				if strings.TrimSpace(cluster) == "" {
					return usagef("--cluster must not be empty")
				}
				req.Cluster = &cluster
			}
			set, err := parseMeta(meta)
			if err != nil {
				return err
			}
			for _, k := range removeMeta {
				if k == "" {
					return usagef("--remove-meta: the key must not be empty")
				}
				if _, both := set[k]; both {
					return usagef("--meta and --remove-meta both name %q: give one", k)
				}
			}
			changesMeta := len(set) > 0 || len(removeMeta) > 0
			if req.Weight == nil && req.Enabled == nil && req.Cluster == nil && !changesMeta {
				return usagef("nothing to change: give --weight, --enabled, --cluster, --meta or --remove-meta")
			}
			ctx := ctxOf(cmd)
			c := a.client()
			var idx uint64
			if !changesMeta {
				idx, err = c.UpdateInstance(ctx, sc.namespace, sc.group, args[0], ip, port, req)
			}
			for attempt := 1; changesMeta; attempt++ {
				cur, _, rerr := c.Instance(ctx, sc.namespace, sc.group, args[0], ip, port, client.QueryOptions{})
				if rerr != nil {
					return rerr
				}
				md := maps.Clone(cur.Instance.Metadata)
				if md == nil {
					md = map[string]string{}
				}
				maps.Copy(md, set)
				for _, k := range removeMeta {
					delete(md, k)
				}
				req.Metadata = md
				idx, err = c.UpdateInstanceIf(ctx, sc.namespace, sc.group, args[0], ip, port, cur.Instance.ModifyIndex, req)
				if !client.IsCASMismatch(err) || attempt == casAttempts {
					break
				}
			}
			if err != nil {
				if client.IsCASMismatch(err) {
					return fmt.Errorf("the instance kept changing while its metadata was merged; run the command again: %w", err)
				}
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "updated %s %s in %s/%s",
				safeText(args[0]), api.JoinAddr(ip, port), safeText(sc.namespace), safeText(sc.group))
		},
	}
	sc.flags(cmd)
	fs := cmd.Flags()
	fs.Float64Var(&weight, "weight", 1, "new weight, 0..10000")
	fs.BoolVar(&enabled, "enabled", true, "whether the instance receives traffic (--enabled=false to disable)")
	fs.StringVar(&cluster, "cluster", "", "move the instance to this cluster")
	fs.StringArrayVar(&meta, "meta", nil, "metadata key=value to add or replace (repeatable)")
	fs.StringArrayVar(&removeMeta, "remove-meta", nil, "metadata key to remove (repeatable)")
	a.clientFlags(cmd)
	return cmd
}

// healthStates are the states `roster set-health` takes.
var healthStates = []string{"healthy", "unhealthy"}

func (a *app) setHealthCmd() *cobra.Command {
	var sc scope
	cmd := &cobra.Command{
		Use:   "set-health SERVICE IP:PORT healthy|unhealthy",
		Short: "Set an instance's health by hand (clusters with check type NONE)",
		Long: "Set the health of an instance whose cluster is not probed, its check type NONE\n" +
			"(PUT .../instances/{ip}:{port}/health). The leader's prober owns the health of every\n" +
			"other instance: for them the server refuses with a conflict. To stop probing a cluster:\n" +
			"roster cluster-config SERVICE CLUSTER --check none.",
		Example: "  roster set-health batch 127.0.0.9:9000 unhealthy",
		Args:    exactArgs(3),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 2 {
				return healthStates, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, port, err := parseInstanceAddr(args[1])
			if err != nil {
				return err
			}
			var healthy bool
			switch args[2] {
			case "healthy":
				healthy = true
			case "unhealthy":
			default:
				return usagef("health %q: want healthy or unhealthy", args[2])
			}
			idx, err := a.client().SetInstanceHealth(ctxOf(cmd), sc.namespace, sc.group, args[0], ip, port, healthy)
			if client.IsConflict(err) {
				return fmt.Errorf("%w; only instances of a cluster with check type NONE take their health by hand (roster cluster-config %s CLUSTER --check none)", err, safeText(args[0]))
			}
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "set %s %s in %s/%s %s",
				safeText(args[0]), api.JoinAddr(ip, port), safeText(sc.namespace), safeText(sc.group), args[2])
		},
	}
	sc.flags(cmd)
	a.clientFlags(cmd)
	return cmd
}
