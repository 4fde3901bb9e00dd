package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/buildinfo"
	"github.com/rosterhq/roster/fsm"
)

// buildInfoGauge is roster_build_info: 1, labelled with this binary's build, so that a
// dashboard shows which release every node runs during a rolling upgrade.
func buildInfoGauge() prometheus.Collector {
	b := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "roster_build_info",
		Help: "Always 1; the labels name this node's build: release version, git commit, Go version and the newest command type it applies.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion,
			"newest_command": fsm.NewestType.String(),
		},
	})
	g.Set(1)
	return g
}
