package server

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rosterhq/roster/internal/diskstat"
)

// The data directory's disk: Raft's log and the state file grow on it, and a node
// whose disk is full stops being ready (it cannot append or apply). Operators see the
// space on /metrics and get a log line well before it runs out.
const (
	// diskCheckInterval is how often the free space is checked for the warning.
	diskCheckInterval = 10 * time.Second
	// diskLowFraction and diskLowBytes: the space is low below either.
	diskLowFraction = 0.05
	diskLowBytes    = 256 << 20
)

// diskMetrics registers roster_disk_free_bytes and roster_disk_total_bytes for dir,
// read at each scrape.
func diskMetrics(reg prometheus.Registerer, dir string) {
	usage := func(pick func(diskstat.Usage) uint64) func() float64 {
		return func() float64 {
			u, err := diskstat.Of(dir)
			if err != nil {
				return -1
			}
			return float64(pick(u))
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "roster_disk_free_bytes", Help: "Bytes this process may still write on the data directory's file system (-1: unknown).",
		}, usage(func(u diskstat.Usage) uint64 { return u.Free })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "roster_disk_total_bytes", Help: "Size of the data directory's file system (-1: unknown).",
		}, usage(func(u diskstat.Usage) uint64 { return u.Total })),
	)
}

// diskLow reports whether u is running out.
func diskLow(u diskstat.Usage) bool {
	return u.FreeFraction() < diskLowFraction || u.Free < diskLowBytes
}

// watchDisk logs a warning when the data directory's disk runs low, once per episode,
// and a line when it has room again, until stop closes.
func watchDisk(dir string, log *slog.Logger, stop <-chan struct{}) {
	tick := time.NewTicker(diskCheckInterval)
	defer tick.Stop()
	low := false
	for {
		if u, err := diskstat.Of(dir); err == nil {
			switch isLow := diskLow(u); {
			case isLow && !low:
				log.Warn("the data directory's disk is running out of space: when it is full this node stops being ready and applying writes",
					"free_bytes", u.Free, "total_bytes", u.Total, "free_percent", int(u.FreeFraction()*100))
			case !isLow && low:
				log.Info("the data directory's disk has room again", "free_bytes", u.Free, "total_bytes", u.Total)
			}
			low = diskLow(u)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
