package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/rosterhq/roster/api"
	"github.com/spf13/cobra"
)

func (a *app) healthCmd() *cobra.Command {
	var sc scope
	cmd := &cobra.Command{
		Use:   "health SERVICE",
		Short: "Show the leader's last probe of each instance of a service",
		Long: "Show what the leader's prober last saw for each instance of SERVICE: the check, the\n" +
			"outcome, its latency and error, and the consecutive successes and failures that drive\n" +
			"the rise/fall state machine. Results live in the leader's memory and start afresh when\n" +
			"leadership moves.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.client().Health(ctxOf(cmd), sc.namespace, sc.group, args[0])
			if err != nil {
				return err
			}
			if a.output == outputJSON {
				return writeJSON(a.stdout, res)
			}
			withViews := false
			for _, r := range res.Results {
				withViews = withViews || len(r.Vantages) > 0
			}
			head := []string{"ADDRESS", "CLUSTER", "CHECK", "HEALTHY", "LAST", "OUTCOME", "LATENCY", "OK/FAIL", "ERROR"}
			if withViews {
				head = append(head, "LAST_CONFIRMATION")
			}
			t := newTable(a.stdout, head...)
			for _, r := range res.Results {
				last := "-"
				if !r.LastCheck.IsZero() {
					last = r.LastCheck.Local().Format(time.TimeOnly)
				}
				healthy := fmt.Sprint(r.Healthy)
				if r.Pending {
					healthy += " (changing)"
				}
				row := []string{api.JoinAddr(r.IP, r.Port), r.Cluster, r.CheckType, healthy, last, orDash(r.Outcome),
					orDash(latency(r.Latency)), fmt.Sprintf("%d/%d", r.ConsecutiveSuccesses, r.ConsecutiveFailures), orDash(r.Error)}
				if withViews {
					row = append(row, orDash(views(r.Vantages)))
				}
				t.row(row...)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if !res.Probing {
				fmt.Fprintf(a.stderr, "note: the leader (%s) has not started probing yet\n", safeText(res.Leader))
			}
			return nil
		},
	}
	sc.flags(cmd)
	a.clientFlags(cmd)
	return cmd
}

func latency(d api.Duration) string {
	if d == 0 {
		return ""
	}
	return d.D().Round(10 * time.Microsecond).String()
}

// views shows a confirmation's views as "n1:down n2:up n3:no answer".
func views(vs []api.Vantage) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		seen := "no answer"
		switch {
		case v.Answered && v.Healthy:
			seen = "up"
		case v.Answered:
			seen = "down"
		}
		parts = append(parts, safeText(v.Node)+":"+seen)
	}
	return strings.Join(parts, " ")
}
