package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rosterhq/roster/client"
)

// watchCmd streams a service's instances (or, with --services, a namespace's service
// list) and prints every change until interrupted.
func (a *app) watchCmd() *cobra.Command {
	var (
		sc       scope
		healthy  bool
		clusters []string
		services bool
		fallback []string
		last     uint64
	)
	cmd := &cobra.Command{
		Use:   "watch [SERVICE]",
		Short: "Print a service's instances, then every change, as it happens",
		Long: "watch opens a server-sent-event stream on the node at --addr and prints the current state,\n" +
			"then each change: a table per change, or one JSON object per line with --output json.\n" +
			"Events come from that node's own state (a follower may lag the leader by a few\n" +
			"milliseconds). A dropped stream is resumed where it stopped, at the --fallback nodes\n" +
			"when the node is gone. With --services it watches the namespace's service list instead.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if services != (len(args) == 0) {
				if services {
					return usagef("usage: %s: --services takes no SERVICE", cmd.UseLine())
				}
				return usagef("usage: %s: name a SERVICE, or pass --services", cmd.UseLine())
			}
			o := client.WatchOptions{
				HealthyOnly: healthy, Clusters: clusters, Group: sc.group, LastIndex: last, Fallback: fallback,
				OnError: func(err error) { fmt.Fprintf(a.stderr, "watch: %v; reconnecting\n", err) },
			}
			ctx := ctxOf(cmd)
			if services {
				o.Group = ""
				if cmd.Flags().Changed("group") {
					o.Group = sc.group
				}
				ch, err := a.client().WatchServices(ctx, sc.namespace, o)
				if err != nil {
					return err
				}
				for ev := range ch {
					if err := a.printServicesEvent(ev); err != nil {
						return err
					}
				}
				return nil
			}
			ch, err := a.client().WatchInstances(ctx, sc.namespace, sc.group, args[0], o)
			if err != nil {
				return err
			}
			for ev := range ch {
				if err := a.printInstancesEvent(args[0], ev); err != nil {
					return err
				}
			}
			return nil
		},
	}
	sc.flags(cmd)
	cmd.Flags().BoolVar(&healthy, "healthy", false, "only healthy, enabled instances (subject to the protect threshold)")
	cmd.Flags().StringSliceVar(&clusters, "cluster", nil, "only these clusters (comma-separated)")
	cmd.Flags().BoolVar(&services, "services", false, "watch the namespace's service list instead of a service")
	cmd.Flags().StringSliceVar(&fallback, "fallback", nil, "other nodes' API addresses to resume at when --addr fails (comma-separated)")
	cmd.Flags().Uint64Var(&last, "last-index", 0, "resume after this index: print nothing until the next change")
	a.clientFlags(cmd)
	return cmd
}

// watchLine is one line of `roster watch --output json`.
type watchLine struct {
	Index    uint64 `json:"index"`
	Time     string `json:"time"`
	Node     string `json:"node"`
	NotFound bool   `json:"notFound,omitempty"`
	Data     any    `json:"data,omitempty"`
}

func (a *app) printInstancesEvent(service string, ev client.InstancesEvent) error {
	if ev.Err != nil {
		return ev.Err
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if a.output == outputJSON {
		line := watchLine{Index: ev.Index, Time: now, Node: ev.Node, NotFound: ev.NotFound}
		if !ev.NotFound {
			line.Data = ev.Instances
		}
		return writeJSONLine(a.stdout, line) // one line per change
	}
	if ev.NotFound {
		_, err := fmt.Fprintf(a.stdout, "# index %d at %s from %s: service %s does not exist\n\n", ev.Index, now, safeText(ev.Node), safeText(service))
		return err
	}
	fmt.Fprintf(a.stdout, "# index %d at %s from %s: %d instance(s)\n", ev.Index, now, safeText(ev.Node), len(ev.Instances.Instances))
	t := newTable(a.stdout, "ADDRESS", "CLUSTER", "WEIGHT", "ENABLED", "HEALTHY", "METADATA")
	for _, in := range ev.Instances.Instances {
		t.row(in.Addr(), in.Cluster, formatFloat(in.Weight), fmt.Sprint(in.Enabled), fmt.Sprint(in.Healthy), formatMeta(in.Metadata))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout)
	return err
}

func (a *app) printServicesEvent(ev client.ServicesEvent) error {
	if ev.Err != nil {
		return ev.Err
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if a.output == outputJSON {
		line := watchLine{Index: ev.Index, Time: now, Node: ev.Node, NotFound: ev.NotFound}
		if !ev.NotFound {
			line.Data = ev.Services
		}
		return writeJSONLine(a.stdout, line) // one line per change
	}
	if ev.NotFound {
		_, err := fmt.Fprintf(a.stdout, "# index %d at %s from %s: the namespace does not exist\n\n", ev.Index, now, safeText(ev.Node))
		return err
	}
	fmt.Fprintf(a.stdout, "# index %d at %s from %s: %d service(s)\n", ev.Index, now, safeText(ev.Node), ev.Services.Total)
	t := newTable(a.stdout, "GROUP", "SERVICE", "MODIFY INDEX")
	for _, s := range ev.Services.Services {
		t.row(s.Group, s.Name, fmt.Sprint(s.ModifyIndex))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout)
	return err
}
