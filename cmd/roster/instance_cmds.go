package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/api"
	"github.com/rosterhq/roster/client"
)

// scope is the namespace and group a client command works in.
type scope struct{ namespace, group string }

func (s *scope) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.namespace, "namespace", api.DefaultNamespace, "namespace")
	cmd.Flags().StringVar(&s.group, "group", api.DefaultGroup, "group")
}

// parseInstanceAddr splits IP:PORT ([v6]:port for IPv6).
func parseInstanceAddr(s string) (string, int, error) {
	ip, port, err := api.SplitAddr(s)
	if err != nil || ip == "" {
		return "", 0, usagef("instance address %q: want IP:PORT ([IPv6]:PORT for IPv6)", s)
	}
	if port < 1 || port > 65535 {
		return "", 0, usagef("instance address %q: port must be 1..65535", s)
	}
	return ip, port, nil
}

// parseMeta turns repeated k=v flags into a map.
func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--meta %q: want key=value", kv)
		}
		md[k] = v
	}
	return md, nil
}

func (a *app) registerCmd() *cobra.Command {
	var (
		sc      scope
		cluster string
		weight  float64
		enabled bool
		meta    []string
	)
	cmd := &cobra.Command{
		Use:   "register SERVICE IP:PORT",
		Short: "Register (or replace) an instance",
		Long: "Register an instance of SERVICE, or replace it if it exists. The service, its cluster and\n" +
			"the namespace are created when missing. IPv6 addresses go in brackets: [::1]:8080.",
		Example: "  roster register orders 10.0.0.7:8080 --cluster east --weight 2 --meta version=1.4.2",
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, port, err := parseInstanceAddr(args[1])
			if err != nil {
				return err
			}
			md, err := parseMeta(meta)
			if err != nil {
				return err
			}
			req := api.InstanceRequest{Cluster: &cluster, Weight: &weight, Enabled: &enabled, Metadata: md}
			idx, err := a.client().RegisterInstance(ctxOf(cmd), sc.namespace, sc.group, args[0], ip, port, req)
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "registered %s %s in %s/%s", args[0], api.JoinAddr(ip, port), sc.namespace, sc.group)
		},
	}
	sc.flags(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", api.DefaultCluster, "cluster of the instance")
	cmd.Flags().Float64Var(&weight, "weight", 1, "weight, 0..10000")
	cmd.Flags().BoolVar(&enabled, "enabled", true, "whether the instance receives traffic")
	cmd.Flags().StringArrayVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) deregisterCmd() *cobra.Command {
	var sc scope
	cmd := &cobra.Command{
		Use:   "deregister SERVICE IP:PORT",
		Short: "Remove an instance",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, port, err := parseInstanceAddr(args[1])
			if err != nil {
				return err
			}
			idx, err := a.client().DeregisterInstance(ctxOf(cmd), sc.namespace, sc.group, args[0], ip, port)
			if err != nil {
				return err
			}
			return a.printWrite(api.WriteResult{Index: idx}, "deregistered %s %s in %s/%s", args[0], api.JoinAddr(ip, port), sc.namespace, sc.group)
		},
	}
	sc.flags(cmd)
	a.clientFlags(cmd)
	return cmd
}

// printWrite prints a write's result: the sentence and its index, or the JSON body.
func (a *app) printWrite(res api.WriteResult, format string, args ...any) error {
	if a.output == outputJSON {
		return writeJSON(a.stdout, res)
	}
	_, err := fmt.Fprintf(a.stdout, format+" (index %d)\n", append(args, res.Index)...)
	return err
}

func (a *app) instancesCmd() *cobra.Command {
	var (
		sc          scope
		healthy     bool
		clusters    []string
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "instances SERVICE",
		Short: "List a service's instances",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := client.InstancesQuery{
				QueryOptions: client.QueryOptions{Consistency: consistency},
				HealthyOnly:  healthy,
				Clusters:     clusters,
			}
			res, _, err := a.client().Instances(ctxOf(cmd), sc.namespace, sc.group, args[0], q)
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			t := newTable(a.stdout, "ADDRESS", "CLUSTER", "WEIGHT", "ENABLED", "HEALTHY", "METADATA")
			for _, in := range res.Instances {
				t.row(in.Addr(), in.Cluster, formatFloat(in.Weight), fmt.Sprint(in.Enabled), fmt.Sprint(in.Healthy), formatMeta(in.Metadata))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if healthy && res.ProtectThresholdReached {
				fmt.Fprintf(a.stderr, "note: protect threshold %s reached: every enabled instance is listed, unhealthy ones included\n",
					formatFloat(res.Service.ProtectThreshold))
			}
			return nil
		},
	}
	sc.flags(cmd)
	cmd.Flags().BoolVar(&healthy, "healthy", false, "only healthy, enabled instances (subject to the protect threshold)")
	cmd.Flags().StringSliceVar(&clusters, "cluster", nil, "only these clusters (comma-separated)")
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale")
	a.clientFlags(cmd)
	return cmd
}

func (a *app) servicesCmd() *cobra.Command {
	var (
		namespace   string
		group, name string
		page, size  int
		consistency string
	)
	cmd := &cobra.Command{
		Use:   "services",
		Short: "List the services of a namespace, with their instance counts",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := client.ServicesQuery{QueryOptions: client.QueryOptions{Consistency: consistency}, Group: group, Name: name, Page: page, Size: size}
			res, _, err := a.client().Services(ctxOf(cmd), namespace, q)
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			t := newTable(a.stdout, "GROUP", "SERVICE", "INSTANCES", "HEALTHY", "PROTECT_THRESHOLD", "METADATA")
			for _, s := range res.Services {
				threshold := formatFloat(s.ProtectThreshold)
				if s.ProtectThresholdReached {
					threshold += " (reached)"
				}
				t.row(s.Group, s.Name, strconv.Itoa(s.InstanceCount), strconv.Itoa(s.HealthyCount), threshold, formatMeta(s.Metadata))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if res.Total > len(res.Services) {
				fmt.Fprintf(a.stderr, "note: showing %d of %d services (use --page and --size)\n", len(res.Services), res.Total)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", api.DefaultNamespace, "namespace")
	cmd.Flags().StringVar(&group, "group", "", "only this group (default all groups)")
	cmd.Flags().StringVar(&name, "name", "", "only services whose name contains this, ignoring case")
	cmd.Flags().IntVar(&page, "page", 0, "page number, from 1 (default the first)")
	cmd.Flags().IntVar(&size, "size", 0, "page size (default the server's)")
	cmd.Flags().StringVar(&consistency, "consistency", "", "read consistency: linearizable (default), leader or stale")
	a.clientFlags(cmd)
	return cmd
}
