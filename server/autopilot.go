package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/raftnode"
)

// autopilotCollector exports autopilot's counters on every node and, on the leader
// only (Consul's autopilot.healthy and autopilot.failure_tolerance are the leader's
// too), the cluster's health and failure tolerance from its latest evaluation.
type autopilotCollector struct {
	node      *raftnode.Node
	removed   *prometheus.Desc
	kept      *prometheus.Desc
	healthy   *prometheus.Desc
	tolerance *prometheus.Desc
}

func newAutopilotCollector(n *raftnode.Node) *autopilotCollector {
	return &autopilotCollector{
		node: n,
		removed: prometheus.NewDesc("roster_autopilot_dead_servers_removed_total",
			"Dead servers (out of contact past --dead-server-threshold) this node removed from the cluster while leading.", nil, nil),
		kept: prometheus.NewDesc("roster_autopilot_dead_servers_kept_total",
			"Dead voters this node, leading, kept in the cluster because removing them would leave fewer voters than "+
				"--autopilot-min-quorum or too few healthy voters (once per server and stretch of being kept).", nil, nil),
		healthy: prometheus.NewDesc("roster_autopilot_healthy",
			"1 when every server is healthy by autopilot's rules, else 0 (exported by the leader only).", nil, nil),
		tolerance: prometheus.NewDesc("roster_autopilot_failure_tolerance",
			"How many healthy voters may fail before the rest are no quorum (exported by the leader only).", nil, nil),
	}
}

func (c *autopilotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.removed
	ch <- c.kept
	ch <- c.healthy
	ch <- c.tolerance
}

func (c *autopilotCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.node.AutopilotMetrics()
	ch <- prometheus.MustNewConstMetric(c.removed, prometheus.CounterValue, float64(m.DeadServersRemoved))
	ch <- prometheus.MustNewConstMetric(c.kept, prometheus.CounterValue, float64(m.DeadServersKept))
	if !m.Leading {
		return
	}
	healthy := 0.0
	if m.Healthy {
		healthy = 1
	}
	ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, healthy)
	ch <- prometheus.MustNewConstMetric(c.tolerance, prometheus.GaugeValue, float64(m.FailureTolerance))
}
